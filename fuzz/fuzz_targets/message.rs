//! Input message parsing, and the whole pipeline behind it: any bytes are a
//! message, a late label, or bad input with a reason; nothing panics.
#![no_main]

use classifyd::features::FeatureConfig;
use classifyd::model::{Hyper, Learner, Model};
use classifyd::pipeline::{Pipeline, PipelineConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = classifyd::message::parse(data, 1 << 16);
    let features = FeatureConfig {
        bits: 10,
        ..FeatureConfig::default()
    };
    let mut p = Pipeline::new(
        Model::new(Hyper::defaults(Learner::Logistic), features),
        PipelineConfig::default(),
    );
    // Each line a message, as the JSON-lines transport hands them over.
    for (i, line) in data.split(|&b| b == b'\n').enumerate() {
        let _ = p.handle(line, &|| i.to_string(), i as u64);
    }
});
