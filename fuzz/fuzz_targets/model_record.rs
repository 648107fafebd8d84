//! Model-topic records as a replica reads them: any sequence of records
//! (the input split at 0xFF bytes, each piece a record, an empty one a
//! deletion) is taken or refused without panicking: chunks assembled and
//! checked, deltas applied to the version held. (Restoring a completed
//! version is the checkpoint target's: it may claim a model of any size.)
#![no_main]

use classifyd::replica::Assembler;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut a = Assembler::default();
    for (i, record) in data.split(|&b| b == 0xFF).enumerate() {
        let key = format!("k{}", i % 4);
        let value = (!record.is_empty()).then_some(record);
        let _ = a.offer(&key, value);
    }
});
