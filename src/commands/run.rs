//! `classifyd run`: the daemon's settings from its flags and one
//! transport's ([`RunSettings`]: JSON lines, or Kafka with `--brokers`),
//! then the daemon, assembled once ([`crate::daemon::run`]), driven by
//! that transport until its input ends or a signal stops it.

use std::time::Duration;

use super::CommandError;
use crate::config::{ConfigFile, RunArgs};
use crate::daemon::{CheckpointSettings, DaemonSettings, EndpointSettings};
use crate::pipeline::PipelineConfig;
use crate::serving::{Bounds, Endpoint};
use crate::shutdown::Shutdown;
use crate::transport::jsonl::{Jsonl, JsonlSettings};
#[cfg(feature = "kafka")]
use crate::transport::kafka::{Kafka, KafkaSettings};

/// What `run` runs: the daemon's settings, and one transport's.
#[derive(Debug)]
pub struct RunSettings {
    pub daemon: DaemonSettings,
    pub transport: TransportSettings,
}

/// One transport's own settings.
#[derive(Debug)]
pub enum TransportSettings {
    /// JSON lines from a file or stdin (no `--brokers`).
    Lines(Box<JsonlSettings>),
    /// Kafka topics (`--brokers`).
    #[cfg(feature = "kafka")]
    Kafka(Box<KafkaSettings>),
}

/// The daemon's settings from the flags, whatever the transport.
fn daemon(a: &RunArgs) -> Result<DaemonSettings, CommandError> {
    let (features, hyper) = a.model.settings()?;
    let pipeline = PipelineConfig {
        explain: a.explain,
        limits: a.model.limits(&features)?,
        review: a.review.settings(),
        review_output: a.review.review_topic.is_some() || a.review.review.is_some(),
        role: a.role,
        ..a.pipeline.settings()
    };
    let door = Bounds {
        connections: 0,
        per_address: a.max_connections_per_address,
        read_timeout: Duration::from_millis(a.read_timeout_ms),
    };
    Ok(DaemonSettings {
        features,
        hyper,
        pipeline,
        checkpoints: CheckpointSettings {
            dir: a.checkpoint_dir.clone(),
            interval: Duration::from_secs(a.checkpoint_interval_secs),
            every_updates: a.checkpoint_every_updates,
            keep: a.keep_checkpoints,
        },
        endpoints: endpoints(a, door)?,
    })
}

/// The endpoints the flags ask for: one line an endpoint, each its
/// settings from its own flags (docs/layout.md: adding an endpoint).
fn endpoints(a: &RunArgs, door: Bounds) -> Result<EndpointSettings, CommandError> {
    let listed: [Option<Box<dyn Endpoint>>; 3] = [
        endpoint(a.http.settings(a.mail.learn_password.as_deref(), door)),
        endpoint(
            a.mail
                .settings(a.pipeline.max_message_bytes, a.http.http_max_concurrent, door),
        ),
        endpoint(a.console.settings(&a.mail, door).map_err(CommandError::Usage)?),
    ];
    Ok(EndpointSettings::new(listed.into_iter().flatten().collect()))
}

fn endpoint(asked: Option<impl Endpoint + 'static>) -> Option<Box<dyn Endpoint>> {
    asked.map(|e| Box::new(e) as Box<dyn Endpoint>)
}

impl RunSettings {
    /// The settings `a` asks for, after [`RunArgs::check`] (a flag of the
    /// other transport is refused, never dropped).
    pub fn of(a: RunArgs, file: &ConfigFile) -> Result<Self, CommandError> {
        a.check().map_err(CommandError::Usage)?;
        let daemon = daemon(&a)?;
        let transport = match a.kafka.brokers.is_some() {
            true => kafka(a, file)?,
            false => TransportSettings::Lines(Box::new(JsonlSettings {
                input: a.input,
                input_name: a.input_name,
                output: a.output,
                dead_letter: a.dead_letter,
                review: a.review.review,
            })),
        };
        Ok(RunSettings { daemon, transport })
    }
}

/// The Kafka transport's settings.
#[cfg(feature = "kafka")]
fn kafka(a: RunArgs, file: &ConfigFile) -> Result<TransportSettings, CommandError> {
    use crate::config::InputFormat;
    use crate::replica::PublishSettings;
    Ok(TransportSettings::Kafka(Box::new(KafkaSettings {
        brokers: a.kafka.required_brokers()?,
        properties: a.kafka.properties(file)?,
        role: a.role,
        input_topic: a.input_topic,
        feedback_topic: a.feedback_topic,
        output_topic: a.output_topic,
        dead_letter_topic: a.dead_letter_topic,
        review_topic: a.review.review_topic,
        group_id: a.group_id,
        model_topic: a.model_topic,
        pool_topic: a.pool_topic,
        reporter_header: a.reporter_header,
        user_header: a.user_header,
        email_input: (a.input_format == InputFormat::Email).then_some(a.label_header),
        create_topics: a.create_topics,
        topic_partitions: a.topic_partitions,
        publish: PublishSettings {
            interval: Duration::from_millis(a.model_publish_ms),
            snapshot_interval: Duration::from_secs(a.model_snapshot_secs),
            ..PublishSettings::default()
        },
        flush_timeout: Duration::from_secs(a.shutdown_timeout_secs),
    })))
}

#[cfg(not(feature = "kafka"))]
fn kafka(_: RunArgs, _: &ConfigFile) -> Result<TransportSettings, CommandError> {
    Err(CommandError::Usage(
        "--brokers: this classifyd was built without Kafka (cargo's feature \"kafka\")".into(),
    ))
}

/// `classifyd run`: the flags' settings, the metrics endpoint
/// (`--metrics-addr`), then the transport until its input ends or SIGTERM
/// or SIGINT stops it.
pub fn run(a: RunArgs, file: &ConfigFile) -> Result<(), CommandError> {
    let metrics_addr = a.metrics_addr.clone();
    let settings = RunSettings::of(a, file)?;
    let shutdown = shutdown_on_signals()?;
    let telemetry = match &metrics_addr {
        Some(addr) => Some(crate::metrics::install(addr)?),
        None => None,
    };
    let (d, telemetry) = (&settings.daemon, telemetry.as_ref());
    match settings.transport {
        TransportSettings::Lines(s) => crate::daemon::run(d, Jsonl::new(*s), &shutdown, telemetry)?,
        #[cfg(feature = "kafka")]
        TransportSettings::Kafka(s) => crate::daemon::run(d, Kafka::new(*s), &shutdown, telemetry)?,
    }
    Ok(())
}

/// A shutdown flag that SIGTERM and SIGINT trigger.
pub(super) fn shutdown_on_signals() -> Result<Shutdown, CommandError> {
    let shutdown = Shutdown::new();
    shutdown.install_signal_handlers().map_err(CommandError::Signals)?;
    Ok(shutdown)
}
