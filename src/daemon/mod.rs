//! The daemon, assembled once for every transport: [`run`] opens the
//! model (a transport's own, or the checkpoint's), builds the [`Core`]
//! over the transport's sink with its parts ([`saving`]: the checkpoint
//! directory, positions and cadence; [`endpoints`]: the copies requests are
//! answered from, the endpoints' lessons ([`lessons`]) and the endpoints
//! themselves; [`publication`]: a learner's model beyond the process),
//! starts the endpoints, then hands the core to the transport, which
//! reads and delivers until its input ends or a signal stops it.
//!
//! Everything the daemon is told comes in one [`DaemonSettings`] (the
//! model's, the pipeline's, the checkpoints' and the endpoints'); a
//! transport keeps only its own (JSON lines' files, Kafka's topics) and
//! implements [`Transport`]. What both need besides: the checkpoint cadence
//! ([`Cadence`]) and the error a run stops with ([`DaemonError`]).

pub(crate) mod core;
pub(crate) mod endpoints;
pub(crate) mod lessons;
pub(crate) mod publication;
pub(crate) mod saving;

use std::path::PathBuf;
use std::time::Duration;

use self::core::{Core, Sink};
pub(crate) use self::endpoints::EndpointSettings;
use self::lessons::Forward;
use self::publication::Publication;
use self::saving::{Cadence, Saving};
use crate::checkpoint::{CheckpointDir, CheckpointError, Positions, Resumed, load_or_new};
use crate::features::FeatureConfig;
use crate::metrics::Telemetry;
use crate::model::HyperChoice;
use crate::pipeline::{Pipeline, PipelineConfig};
use crate::serving::Waker;
use crate::shutdown::Shutdown;

/// Why the daemon stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// Transparent: the error's own message, once (`{0}` with `#[from]`
    /// printed it twice in `main`'s cause chain).
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("checkpoint {path} cannot be restored")]
    Restore {
        path: PathBuf,
        #[source]
        source: crate::checkpoint::RestoreError,
    },
    /// A Kafka client failed: which one, or at what.
    #[cfg(feature = "kafka")]
    #[error("kafka: {what}")]
    Kafka {
        what: &'static str,
        #[source]
        source: rdkafka::error::KafkaError,
    },
    /// Settings that cannot work together.
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Serve(#[from] crate::serving::ServeError),
}

/// Everything the daemon is told, whatever its transport: the model's
/// settings (features, learners), the pipeline's (its role among them),
/// the checkpoints' and the endpoints'.
#[derive(Debug)]
pub struct DaemonSettings {
    pub features: FeatureConfig,
    pub hyper: HyperChoice,
    pub pipeline: PipelineConfig,
    pub checkpoints: CheckpointSettings,
    /// The endpoints served besides the transport.
    pub endpoints: EndpointSettings,
}

/// Where checkpoints go and when.
#[derive(Clone, Debug)]
pub struct CheckpointSettings {
    /// None: nothing is saved (but by a JSON-lines run's positions, kept in memory).
    pub dir: Option<PathBuf>,
    pub interval: Duration,
    /// Checkpoint after this many learned updates too (0: off).
    pub every_updates: u64,
    /// Checkpoints kept in the directory.
    pub keep: usize,
}

/// The model a daemon starts with and where its inputs stand.
pub(crate) struct Model {
    pub pipeline: Pipeline,
    pub positions: Positions,
    /// Where its checkpoints go (none: a predictor's, or a run without).
    pub dir: Option<CheckpointDir>,
    /// The checkpoint it resumed from (none: a new model).
    pub resumed_from: Option<PathBuf>,
}

/// What a transport is given to open: the daemon's settings, and the ways
/// to its model.
pub(crate) struct Start<'a> {
    settings: &'a DaemonSettings,
    /// What a transport that waits at its start (a predictor, for the
    /// learner's first version) watches; Kafka's alone.
    #[cfg_attr(not(feature = "kafka"), allow(dead_code))]
    pub shutdown: &'a Shutdown,
}

// What only the Kafka transport asks of its start: the daemon's
// settings, whether an endpoint teaches, a model served from elsewhere.
#[cfg_attr(not(feature = "kafka"), allow(dead_code))]
impl Start<'_> {
    /// The daemon's settings.
    pub(crate) fn settings(&self) -> &DaemonSettings {
        self.settings
    }

    /// Whether an endpoint asked for takes lessons (the mail protocols,
    /// the console): a predictor then needs a way to forward them.
    pub(crate) fn teaches(&self) -> bool {
        self.settings.endpoints.teaches()
    }

    /// The newest good checkpoint's model and positions, or a new model
    /// (see [`load_or_new`]); with `required`, a run without a checkpoint
    /// directory is refused, saying why (`what`).
    pub(crate) fn checkpointed(&self, required: Option<&str>) -> Result<Model, DaemonError> {
        let c = &self.settings.checkpoints;
        if let (None, Some(why)) = (&c.dir, required) {
            return Err(DaemonError::Usage(format!("--checkpoint-dir is required {why}")));
        }
        let dir = match &c.dir {
            Some(d) => Some(CheckpointDir::open(d, c.keep)?),
            None => None,
        };
        let s = self.settings;
        let Resumed {
            pipeline,
            positions,
            from,
        } = load_or_new(dir.as_ref(), &s.features, &s.hyper, s.pipeline.clone())?;
        Ok(Model {
            pipeline,
            positions,
            dir,
            resumed_from: from,
        })
    }

    /// A model that came from elsewhere (a predictor's, from the model
    /// topic), with no checkpoint and no positions.
    pub(crate) fn served(&self, model: crate::model::Model) -> Model {
        Model {
            pipeline: Pipeline::new(model, self.settings.pipeline.clone()),
            positions: Positions::default(),
            dir: None,
            resumed_from: None,
        }
    }
}

/// What a transport opened: the model, its sink, and what it adds to the
/// daemon.
pub(crate) struct Opened<K> {
    pub model: Model,
    pub sink: K,
    /// A learner's publication of its model beyond the process.
    pub publication: Option<Box<dyn Publication>>,
    /// Where a predictor forwards the lessons its endpoints take (asked
    /// for only when [`Start::teaches`]).
    pub forward: Option<Box<dyn Forward>>,
    /// What wakes the transport where it waits for input, when a lesson
    /// is queued.
    pub wake: Option<Waker>,
}

/// A transport as the daemon drives it: `commands::run` makes it from its
/// own settings and hands it to [`run`].
pub(crate) trait Transport {
    type Sink: Sink;

    /// Opens the input and the sink, and the model: the checkpoint's
    /// ([`Start::checkpointed`]) or its own ([`Start::served`]); `None`
    /// when shut down before a model came.
    fn open(&mut self, start: &Start<'_>) -> Result<Option<Opened<Self::Sink>>, DaemonError>;

    /// Reads and delivers through `core` until the input ends or
    /// `shutdown`, then finishes (the last checkpoint, the run's report).
    fn drive(
        self,
        core: Core<Self::Sink>,
        shutdown: &Shutdown,
        telemetry: Option<&Telemetry>,
    ) -> Result<(), DaemonError>;
}

/// The daemon: `transport` opened, the core assembled over its sink with
/// the checkpoint's cadence and the endpoints, then driven by it until
/// its input ends or `shutdown`.
pub(crate) fn run<T: Transport>(
    s: &DaemonSettings,
    mut transport: T,
    shutdown: &Shutdown,
    telemetry: Option<&Telemetry>,
) -> Result<(), DaemonError> {
    let start = Start { settings: s, shutdown };
    let Some(opened) = transport.open(&start)? else {
        return Ok(());
    };
    let Opened {
        model,
        sink,
        publication,
        forward,
        wake,
    } = opened;
    let c = &s.checkpoints;
    let cadence = Cadence::new(c.interval, c.every_updates, model.pipeline.model().version());
    let saving = Saving::new(model.dir, model.positions, cadence, model.resumed_from);
    let mut core = Core::new(model.pipeline, saving, sink);
    if let Some(p) = publication {
        core.publish_to(p);
    }
    if let Some(to) = forward {
        core.forward_lessons(to);
    }
    if let Some(wake) = wake {
        core.wake_for_lessons(wake);
    }
    core.serve(&s.endpoints)?;
    transport.drive(core, shutdown, telemetry)
}
