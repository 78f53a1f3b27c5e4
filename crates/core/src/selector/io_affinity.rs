//! STUB: replaced by the selector helper.
#![allow(missing_docs)]
use super::{ArgError, PathSelector, Pick, Setup};
#[derive(Debug)]
pub struct IoAffinity;
impl PathSelector for IoAffinity {
    const NAME: &'static str = "io-affinity";
    const TABLE_PATH_ARGS: usize = 0;
    const STATUS_INFO_ARGS: usize = 0;
    type ThreadState = ();
    fn new(_setup: &Setup<'_>) -> Result<Self, ArgError> { Ok(IoAffinity) }
    fn select(&self, _thread: &mut (), pick: &Pick<'_>) -> u16 { pick.candidates[0] }
    fn table_path_args(&self, _position: usize) -> Vec<String> { Vec::new() }
}
