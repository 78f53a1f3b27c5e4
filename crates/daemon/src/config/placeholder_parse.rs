// TEMPORARY until the config parser lands; removed at merge.
use super::{DaemonConfig, MapConfig};
impl DaemonConfig {
    /// Temporary.
    pub fn parse(_text: &str) -> Result<DaemonConfig, String> {
        Err("config parsing is not merged yet".into())
    }
    /// Temporary.
    pub fn load(path: &std::path::Path) -> Result<DaemonConfig, String> {
        Err(format!(
            "{}: config parsing is not merged yet",
            path.display()
        ))
    }
    /// Temporary.
    pub fn map(&self, name: &str) -> Option<&MapConfig> {
        self.maps.iter().find(|map| map.name == name)
    }
}
impl MapConfig {
    /// Temporary.
    pub fn options(&self) -> mpio_core::map::MapOptions {
        mpio_core::map::MapOptions {
            name: self.name.clone(),
            io_timeout_ns: self.io_timeout_ns,
            max_attempts: self.max_attempts,
            ..Default::default()
        }
    }
}
