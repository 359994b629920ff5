//! The training loop's state: adapter, optimizer and position in the data, one optimizer step
//! at a time, with checkpoints that resume to the identical next step.
//!
//! Everything random is derived from the seed and the position: the data order of each epoch
//! is a permutation seeded by (seed, epoch) and the dropout of each micro-batch is seeded by
//! (seed, micro-batch index), so a checkpoint needs only the adapter, the optimizer moments and
//! the step count. A micro-batch is one sequence: no padding and no attention across packed
//! examples, and on the CPU one sequence of a few hundred tokens already fills the GEMMs.

use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

use candle_core::Tensor;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};

use crate::adamw::{AdamW, AdamWConfig, clip_grad_norm};
use crate::error::{TrainError, TrainResult};
use crate::examples::TrainingExample;
use crate::lora_decoder::LoraDecoder;
use crate::lora_params::{LoraParams, LoraSpec, write_json};
use crate::schedule::LrSchedule;
use crate::seed::mix;

/// Everything that decides a run's numbers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrainConfig {
    pub lora: LoraSpec,
    pub optimizer: AdamWConfig,
    pub schedule: LrSchedule,
    /// Sequences per optimizer step; their gradients are averaged.
    pub grad_accumulation: usize,
    pub max_grad_norm: f64,
    pub seed: u64,
}

impl TrainConfig {
    pub fn validate(&self) -> TrainResult<()> {
        self.lora.validate()?;
        if self.grad_accumulation == 0 {
            return Err(TrainError::invalid(
                "grad_accumulation",
                "must be at least 1",
            ));
        }
        if self.schedule.total_steps == 0 {
            return Err(TrainError::invalid("steps", "must be at least 1"));
        }
        if self.schedule.peak.is_nan() || self.schedule.peak <= 0.0 {
            return Err(TrainError::invalid("lr", "must be positive"));
        }
        if self.max_grad_norm.is_nan() || self.max_grad_norm <= 0.0 {
            return Err(TrainError::invalid("max_grad_norm", "must be positive"));
        }
        Ok(())
    }
}

/// What one optimizer step did.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct StepReport {
    /// 1-based: the number of optimizer steps taken so far.
    pub step: u64,
    pub loss: f64,
    pub lr: f64,
    pub grad_norm: f64,
    /// Tokens run through the model (prompt and answer) and answer tokens scored.
    pub tokens: usize,
    pub answer_tokens: usize,
    pub seconds: f64,
}

#[derive(Debug)]
pub struct Trainer<'a> {
    model: &'a LoraDecoder,
    examples: &'a [TrainingExample],
    config: TrainConfig,
    lora: LoraParams,
    optimizer: AdamW,
    /// The permutation of the epoch last used, cached.
    order: Option<(u64, Vec<usize>)>,
}

const STATE_FILE: &str = "state.json";
const LORA_FILE: &str = "lora.safetensors";
const OPTIMIZER_FILE: &str = "optimizer.safetensors";

impl<'a> Trainer<'a> {
    pub fn new(
        model: &'a LoraDecoder,
        examples: &'a [TrainingExample],
        config: TrainConfig,
    ) -> TrainResult<Self> {
        config.validate()?;
        if examples.is_empty() {
            return Err(TrainError::Data("no training examples".into()));
        }
        let lora = LoraParams::init(model.config(), config.lora.clone(), config.seed)?
            .to_device(model.device())?;
        Ok(Self {
            model,
            examples,
            optimizer: AdamW::new(config.optimizer),
            config,
            lora,
            order: None,
        })
    }

    /// Continues from a checkpoint written by [`Self::save`] with the same configuration.
    pub fn resume(
        model: &'a LoraDecoder,
        examples: &'a [TrainingExample],
        config: TrainConfig,
        dir: &Path,
    ) -> TrainResult<Self> {
        let mut trainer = Self::new(model, examples, config)?;
        let state: CheckpointState = serde_json::from_str(
            &std::fs::read_to_string(dir.join(STATE_FILE))
                .map_err(|e| TrainError::io(&dir.join(STATE_FILE), e))?,
        )
        .map_err(|e| TrainError::Checkpoint(format!("{STATE_FILE}: {e}")))?;
        if state.config != trainer.config {
            return Err(TrainError::Checkpoint(
                "the checkpoint was written with another training configuration".into(),
            ));
        }
        if state.examples != examples.len() {
            return Err(TrainError::Checkpoint(format!(
                "the checkpoint saw {} examples, this run has {}",
                state.examples,
                examples.len()
            )));
        }
        let load = |file: &str| -> TrainResult<HashMap<String, Tensor>> {
            Ok(candle_core::safetensors::load(
                dir.join(file),
                trainer.model.device(),
            )?)
        };
        trainer.lora.load_values(&load(LORA_FILE)?)?;
        trainer.optimizer =
            AdamW::restore(trainer.config.optimizer, state.step, &load(OPTIMIZER_FILE)?)?;
        Ok(trainer)
    }

    /// Writes the adapter, the optimizer moments and the step count to `dir`.
    pub fn save(&self, dir: &Path) -> TrainResult<()> {
        std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
        let lora: HashMap<String, Tensor> = self
            .lora
            .named_vars()
            .into_iter()
            .map(|(n, v)| (n, v.as_tensor().clone()))
            .collect();
        candle_core::safetensors::save(&lora, dir.join(LORA_FILE))?;
        candle_core::safetensors::save(&self.optimizer.state(), dir.join(OPTIMIZER_FILE))?;
        let state = CheckpointState {
            step: self.optimizer.steps(),
            examples: self.examples.len(),
            config: self.config.clone(),
        };
        let value =
            serde_json::to_value(&state).map_err(|e| TrainError::Checkpoint(e.to_string()))?;
        write_json(&dir.join(STATE_FILE), &value)
    }

    pub fn lora(&self) -> &LoraParams {
        &self.lora
    }

    pub fn config(&self) -> &TrainConfig {
        &self.config
    }

    /// Optimizer steps taken.
    pub fn steps_done(&self) -> u64 {
        self.optimizer.steps()
    }

    /// The example of micro-batch `index` (counted over the whole run): step `s` trains on
    /// micro-batches `s * grad_accumulation ..` in order.
    pub fn example_at(&mut self, index: u64) -> &'a TrainingExample {
        let n = self.examples.len() as u64;
        let epoch = index / n;
        if self.order.as_ref().is_none_or(|(e, _)| *e != epoch) {
            let mut order: Vec<usize> = (0..self.examples.len()).collect();
            let mut rng = rand::rngs::StdRng::seed_from_u64(mix(self.config.seed, epoch));
            order.shuffle(&mut rng);
            self.order = Some((epoch, order));
        }
        let order = &self.order.as_ref().expect("set above").1;
        &self.examples[order[(index % n) as usize]]
    }

    /// One optimizer step over `grad_accumulation` sequences.
    pub fn step(&mut self) -> TrainResult<StepReport> {
        let started = Instant::now();
        let step = self.optimizer.steps();
        let accum = self.config.grad_accumulation;
        let params = self.lora.named_vars();
        let mut sums: Vec<Option<Tensor>> = vec![None; params.len()];
        let (mut loss_sum, mut tokens, mut answer_tokens) = (0f64, 0usize, 0usize);
        for micro in 0..accum {
            let index = step * accum as u64 + micro as u64;
            let example = self.example_at(index);
            let mut rng = rand::rngs::StdRng::seed_from_u64(mix(self.config.seed ^ 0xD0, index));
            let dropout = Some((self.config.lora.dropout, &mut rng));
            let loss = self.model.answer_loss(
                Some(&self.lora),
                &example.tokens,
                example.answer_start,
                dropout,
            )?;
            loss_sum += loss.to_scalar::<f32>()? as f64;
            tokens += example.tokens.len();
            answer_tokens += example.answer_tokens();
            let grads = loss.backward()?;
            for ((_, var), sum) in params.iter().zip(sums.iter_mut()) {
                let g = match grads.get(var.as_tensor()) {
                    Some(g) => g.clone(),
                    None => var.as_tensor().zeros_like()?,
                };
                *sum = Some(match sum.take() {
                    Some(s) => (s + g)?,
                    None => g,
                });
            }
        }
        let mut grads = sums
            .into_iter()
            .map(|s| s.map(|s| s / accum as f64).transpose())
            .collect::<Result<Option<Vec<Tensor>>, _>>()?
            .ok_or_else(|| TrainError::Model("a parameter got no gradient".into()))?;
        let grad_norm = clip_grad_norm(&mut grads, self.config.max_grad_norm)?;
        let lr = self.config.schedule.at(step);
        self.optimizer.step(&params, &grads, lr)?;
        Ok(StepReport {
            step: step + 1,
            loss: loss_sum / accum as f64,
            lr,
            grad_norm,
            tokens,
            answer_tokens,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct CheckpointState {
    step: u64,
    examples: usize,
    config: TrainConfig,
}
