//! The size a path's storage holds now, read afresh: what `mpio resize`
//! grows a map to. A map's paths are sized once, when they open; a LUN
//! or file that grew since is only seen by asking again.

use crate::file::FilePath;
use crate::nbd::NbdTarget;
use crate::uri::Endpoint;
use crate::{PathNames, Transports};
use std::path::Path;

impl Transports {
    /// The bytes behind path word `word` (a name in `names`, else a
    /// URI) now: a file's length or block device's size from a fresh
    /// open, an NBD export's size from a fresh handshake, a null path's
    /// or memory disk's size.
    ///
    /// # Errors
    /// Why the path could not be sized (unreachable, not opened, no such
    /// memory disk), naming the path word.
    pub fn path_size(&self, word: &str, names: &PathNames) -> Result<u64, String> {
        let uri = names.get(word).map_or(word, String::as_str);
        // A parse error names the word already.
        let endpoint = Endpoint::parse(uri).map_err(|error| error.to_string())?;
        let sized = match endpoint {
            Endpoint::Null { size_bytes, .. } => Ok(size_bytes),
            Endpoint::Memory { disk, .. } => self
                .existing_disk(&disk)
                .map(|disk| disk.size_bytes())
                .ok_or_else(|| format!("no memory disk {disk:?}")),
            Endpoint::File { path, direct } => {
                FilePath::size_now(Path::new(&path), direct).map_err(|error| error.to_string())
            }
            // A target of no size takes any export; its probe is one
            // handshake, closed with a disconnect.
            Endpoint::Nbd(address) => NbdTarget::new(address, 0)
                .probe()
                .map(|export| export.size_bytes)
                .map_err(|error| error.to_string()),
        };
        sized.map_err(|why| format!("path {word:?}: {why}"))
    }
}
