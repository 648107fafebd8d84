//! Shutdown signalling: SIGTERM and SIGINT set a flag that the loops poll
//! between messages; a second signal exits at once (status 130). Tests make
//! their own [`Shutdown`] and trigger it, without signals.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// A cloneable shutdown flag.
#[derive(Clone, Debug, Default)]
pub(crate) struct Shutdown(Arc<AtomicBool>);

impl Shutdown {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Asks every loop holding a clone to stop.
    #[cfg(test)]
    pub(crate) fn trigger(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_triggered(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Routes SIGTERM and SIGINT to this flag; a second one terminates the
    /// process immediately.
    pub(crate) fn install_signal_handlers(&self) -> std::io::Result<()> {
        use signal_hook::consts::{SIGINT, SIGTERM};
        for sig in [SIGTERM, SIGINT] {
            // Registered first: acts when the flag is already set (a second signal).
            signal_hook::flag::register_conditional_shutdown(sig, 130, Arc::clone(&self.0))?;
            signal_hook::flag::register(sig, Arc::clone(&self.0))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clones_share_the_flag() {
        let a = Shutdown::new();
        let b = a.clone();
        assert!(!b.is_triggered());
        a.trigger();
        assert!(b.is_triggered());
    }
}
