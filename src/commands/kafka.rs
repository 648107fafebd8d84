//! The commands that only talk to Kafka: `demo-produce` (a labeled stream
//! with late feedback) and `tail` (a topic's records as lines).

use super::CommandError;
use super::run::shutdown_on_signals;
use crate::config::{ConfigFile, DemoArgs, TailArgs};

/// `classifyd demo-produce`: the messages sent, and the labels among them.
pub fn demo(a: &DemoArgs, file: &ConfigFile) -> Result<(u64, u64), CommandError> {
    let shutdown = shutdown_on_signals()?;
    let s = crate::demo::DemoSettings {
        brokers: a.kafka.required_brokers()?,
        input: a.input.clone(),
        input_topic: a.input_topic.clone(),
        feedback_topic: a.feedback_topic.clone(),
        rate: a.rate,
        holdback_every: a.holdback_every,
        feedback_delay: a.feedback_delay,
        repeat: a.repeat,
        properties: a.kafka.properties(file)?,
    };
    Ok(crate::demo::run(&s, &shutdown)?)
}

/// `classifyd tail`: a topic's records on stdout; how many.
pub fn tail(a: &TailArgs, file: &ConfigFile) -> Result<u64, CommandError> {
    let shutdown = shutdown_on_signals()?;
    let s = crate::transport::kafka::tail::TailSettings {
        brokers: a.kafka.required_brokers()?,
        topic: a.topic.clone(),
        max: a.max,
        no_follow: a.no_follow,
        properties: a.kafka.properties(file)?,
    };
    Ok(crate::transport::kafka::tail::tail(
        &s,
        &shutdown,
        &mut std::io::stdout().lock(),
    )?)
}
