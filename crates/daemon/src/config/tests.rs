use super::*;

#[test]
fn smoke() {
    let config = DaemonConfig::parse(include_str!("../../../../docs/examples/mpio.toml")).unwrap();
    for map in &config.maps {
        println!("{} {} {:?}", map.name, map.table, map.no_path_retry);
    }
    for t in ["[[map]]\nname='x'\nsize=5\n[[map.path]]\nname='a'\nuri='null:1G'\n", "[[map]]\nname='x'\nsize='1G'\nbogus=1\n", "a=", "[[map]]\nname='x'\nsize='1G'\nselector='round-robin'\nselector_args=['x']\n[[map.path]]\nname='a'\nuri='null:1G'\n",
    "[[map]]\nname='x'\nsize='1G'\nselector='round-robin'\n[[map.path]]\nname='a'\nuri='null:1G'\nargs=['q']\n",
    "[[map]]\nname='x'\ntable='0 8 multipath 0 0 1 1 round-robin 0 1 1 zz 1'\n",
    "[[map]]\nname='x'\ntable='0 8 multipath 0 0 1 1 round-robin 0 1 1 null:1G x'\n",
    "[[map]]\nname='x'\n[[map.path]]\nname='a'\nuri = 'nbd:/x'\n", "[defaults.marginal]\nfailures = 1\n"] {
        println!("{}", DaemonConfig::parse(t).unwrap_err());
    }
}
