//! `classifyd run`: the daemon's settings from its flags, as the settings
//! of one transport ([`RunSettings`]: JSON lines, or Kafka with
//! `--brokers`), then that transport run until its input ends or a signal
//! stops it.

use std::time::Duration;

use super::CommandError;
use crate::config::{ConfigFile, RunArgs};
use crate::console::ConsoleSettings;
use crate::features::FeatureConfig;
use crate::http::HttpSettings;
use crate::mail::MailSettings;
use crate::model::HyperChoice;
use crate::pipeline::PipelineConfig;
use crate::serving::Bounds;
use crate::shutdown::Shutdown;
use crate::transport::jsonl::JsonlSettings;
#[cfg(feature = "kafka")]
use crate::transport::kafka::KafkaSettings;

/// What `run` runs: one transport's settings, each with the pipeline's.
#[derive(Debug)]
pub enum RunSettings {
    /// JSON lines from a file or stdin (no `--brokers`).
    Lines(Box<JsonlSettings>),
    /// Kafka topics (`--brokers`).
    #[cfg(feature = "kafka")]
    Kafka(Box<KafkaSettings>),
}

/// What both transports take from the flags alike.
struct Common {
    features: FeatureConfig,
    hyper: HyperChoice,
    pipeline: PipelineConfig,
    http: Option<HttpSettings>,
    mail: Option<MailSettings>,
    console: Option<ConsoleSettings>,
}

impl Common {
    fn of(a: &RunArgs) -> Result<Self, CommandError> {
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
        Ok(Common {
            features,
            hyper,
            pipeline,
            http: a.http.settings(a.mail.learn_password.as_deref(), door),
            mail: a
                .mail
                .settings(a.pipeline.max_message_bytes, a.http.http_max_concurrent, door),
            console: a.console.settings(&a.mail, door).map_err(CommandError::Usage)?,
        })
    }
}

impl RunSettings {
    /// The settings `a` asks for, after [`RunArgs::check`] (a flag of the
    /// other transport is refused, never dropped).
    pub fn of(a: RunArgs, file: &ConfigFile) -> Result<Self, CommandError> {
        a.check().map_err(CommandError::Usage)?;
        let common = Common::of(&a)?;
        if a.kafka.brokers.is_some() {
            return kafka(a, file, common);
        }
        Ok(RunSettings::Lines(Box::new(JsonlSettings {
            input: a.input,
            input_name: a.input_name,
            output: a.output,
            dead_letter: a.dead_letter,
            review: a.review.review,
            checkpoint_dir: a.checkpoint_dir,
            checkpoint_interval: Duration::from_secs(a.checkpoint_interval_secs),
            checkpoint_every_updates: a.checkpoint_every_updates,
            keep_checkpoints: a.keep_checkpoints,
            features: common.features,
            hyper: common.hyper,
            pipeline: common.pipeline,
            http: common.http,
            mail: common.mail,
            console: common.console,
        })))
    }
}

/// The Kafka transport's settings.
#[cfg(feature = "kafka")]
fn kafka(a: RunArgs, file: &ConfigFile, common: Common) -> Result<RunSettings, CommandError> {
    use crate::config::InputFormat;
    use crate::replica::PublishSettings;
    Ok(RunSettings::Kafka(Box::new(KafkaSettings {
        brokers: a.kafka.required_brokers()?,
        properties: a.kafka.properties(file)?,
        input_topic: a.input_topic,
        feedback_topic: a.feedback_topic,
        output_topic: a.output_topic,
        dead_letter_topic: a.dead_letter_topic,
        review_topic: a.review.review_topic,
        group_id: a.group_id,
        checkpoint_dir: a.checkpoint_dir,
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
        checkpoint_interval: Duration::from_secs(a.checkpoint_interval_secs),
        checkpoint_every_updates: a.checkpoint_every_updates,
        keep_checkpoints: a.keep_checkpoints,
        flush_timeout: Duration::from_secs(a.shutdown_timeout_secs),
        http: common.http,
        mail: common.mail,
        console: common.console,
        features: common.features,
        hyper: common.hyper,
        pipeline: common.pipeline,
    })))
}

#[cfg(not(feature = "kafka"))]
fn kafka(_: RunArgs, _: &ConfigFile, _: Common) -> Result<RunSettings, CommandError> {
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
    match settings {
        RunSettings::Lines(s) => {
            crate::transport::jsonl::run_jsonl(&s, &shutdown, telemetry.as_ref())?;
        }
        #[cfg(feature = "kafka")]
        RunSettings::Kafka(s) => {
            crate::transport::kafka::run(&s, &shutdown, telemetry.as_ref())?;
        }
    }
    Ok(())
}

/// A shutdown flag that SIGTERM and SIGINT trigger.
pub(super) fn shutdown_on_signals() -> Result<Shutdown, CommandError> {
    let shutdown = Shutdown::new();
    shutdown.install_signal_handlers().map_err(CommandError::Signals)?;
    Ok(shutdown)
}
