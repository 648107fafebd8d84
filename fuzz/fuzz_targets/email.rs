//! The e-mail path: any bytes as a raw message are rendered (bounded) or
//! refused, and as an "email_base64" message go through the pipeline
//! (featurized, predicted, learned) without a panic.
#![no_main]

use classifyd::email::{self, Views};
use classifyd::features::FeatureConfig;
use classifyd::model::{Hyper, Learner, Model};
use classifyd::pipeline::{Pipeline, PipelineConfig};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = email::render(data, Views::default()) {
        assert!(r.text.len() <= 4 * email::RAW_PREFIX_BYTES + email::MAX_BODY_BYTES + 256 * 200);
    }
    let features = FeatureConfig {
        bits: 10,
        ..FeatureConfig::default()
    };
    let mut p = Pipeline::new(
        Model::new(Hyper::defaults(Learner::Logistic), features),
        PipelineConfig::default(),
    );
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD.encode(data);
    for label in ["spam", "ham"] {
        let line = format!(r#"{{"id": "m", "email_base64": "{b64}", "label": "{label}"}}"#);
        let _ = p.handle(line.as_bytes(), &|| "0".to_string(), 0);
    }
    let _ = p.handle(format!(r#"{{"email_base64": "{b64}"}}"#).as_bytes(), &|| "1".to_string(), 0);
});
