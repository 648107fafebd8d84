//! A model's scoring image: the model as a checkpoint holds it
//! ([`checkpoint::capture_model`]), less what only learning needs (the
//! AdaGrad sums of linear weights). A predictor that restores it scores
//! exactly as the learner's model does (the same floats in the same
//! places); a full version on the model topic is one, written as a stream
//! ([`scoring_pieces`]), and a delta
//! ([`super::changes`]) is in its layout.

use crate::checkpoint::{self, pb};
use crate::model::Model;

use pb::model_state::State;

/// The model's scoring image: features, hyperparameters and model state
/// without optimizer state, pipeline state or positions.
pub fn scoring_image(m: &Model) -> pb::Checkpoint {
    let mut c = checkpoint::capture_model(m);
    if let Some(pb::ModelState {
        state: Some(State::Linear(l)),
        ..
    }) = &mut c.model
        && l.adagrad
    {
        strip_adagrad(l);
    }
    c
}

/// The same image as a stream: [`scoring_image`] without the weights
/// (their stride and layout are in), then the weights a piece at a time
/// ([`checkpoint::fragments`], AdaGrad's sums left out), each handed to
/// `each` to encode: what [`checkpoint::read_model`] reads back, with no
/// second copy of the weights held on either side. The image says it was
/// made at `created_unix_ms` (the publication's time: the same model
/// gives the same bytes however often it is encoded).
pub fn scoring_pieces(m: &Model, created_unix_ms: u64, each: &mut dyn FnMut(&pb::Checkpoint)) {
    let mut light = checkpoint::capture_model_with(m, checkpoint::WeightsPlacement::Apart);
    light.created_unix_ms = created_unix_ms;
    let mut slots = None;
    if let Some(pb::ModelState {
        state: Some(State::Linear(l)),
        ..
    }) = &mut light.model
        && l.adagrad
    {
        slots = Some(2 + l.averaged as usize);
        strip_adagrad(l);
    }
    each(&light);
    drop(light);
    let _ = checkpoint::fragments(m, &mut |piece: &pb::Checkpoint| -> Result<(), ()> {
        match (slots, &piece.model) {
            (
                Some(slots),
                Some(pb::ModelState {
                    state: Some(State::Linear(l)),
                    ..
                }),
            ) => {
                let mut l = l.clone();
                strip_slot(&mut l, slots);
                each(&pb::Checkpoint {
                    model: Some(pb::ModelState {
                        state: Some(State::Linear(l)),
                        ..Default::default()
                    }),
                    ..Default::default()
                });
            }
            _ => each(piece),
        }
        Ok(())
    });
}

/// Drops the last slot of every row (AdaGrad's sums: the checkpoint
/// layout is `[v | A | sums]`, `columns` floats each) or sparse entry.
fn strip_adagrad(l: &mut pb::LinearState) {
    l.adagrad = false;
    strip_slot(l, 2 + l.averaged as usize);
}

/// Drops the last of `slots` slots of every row or entry of `l`.
fn strip_slot(l: &mut pb::LinearState, slots: usize) {
    let strip = |values: &mut Vec<f32>, stride: &mut u32| {
        let n = *stride as usize;
        if n == 0 || !n.is_multiple_of(slots) {
            return;
        }
        let keep = n / slots * (slots - 1);
        let mut kept = Vec::with_capacity(values.len() / n * keep);
        for row in values.chunks_exact(n) {
            kept.extend_from_slice(&row[..keep]);
        }
        *values = kept;
        *stride = keep as u32;
    };
    if let Some(rows) = &mut l.rows {
        strip(&mut rows.values, &mut rows.stride);
    }
    if let Some(e) = &mut l.entries {
        strip(&mut e.values, &mut e.stride);
    }
}
