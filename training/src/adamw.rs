//! AdamW (decoupled weight decay) with its moments in the open, so a checkpoint can hold them
//! and a resumed run takes the identical next step. candle-nn's AdamW keeps its state private.

use std::collections::HashMap;

use candle_core::{Tensor, Var};
use serde::{Deserialize, Serialize};

use crate::error::{TrainError, TrainResult};

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AdamWConfig {
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    /// PyTorch's defaults, with no weight decay (PEFT's LoRA recipes use none).
    fn default() -> Self {
        Self {
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

/// First and second moments per parameter, keyed by the parameter's name.
#[derive(Debug, Clone)]
pub struct AdamW {
    config: AdamWConfig,
    /// Updates taken so far (bias correction uses it).
    steps: u64,
    m: HashMap<String, Tensor>,
    v: HashMap<String, Tensor>,
}

impl AdamW {
    pub fn new(config: AdamWConfig) -> Self {
        Self {
            config,
            steps: 0,
            m: HashMap::new(),
            v: HashMap::new(),
        }
    }

    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// One update of every named parameter with its gradient at learning rate `lr`:
    /// `p ← p − lr·(m̂ / (√v̂ + eps) + wd·p)`.
    pub fn step(&mut self, params: &[(String, Var)], grads: &[Tensor], lr: f64) -> TrainResult<()> {
        if params.len() != grads.len() {
            return Err(TrainError::Checkpoint(format!(
                "{} parameters, {} gradients",
                params.len(),
                grads.len()
            )));
        }
        self.steps += 1;
        let c = self.config;
        let t = self.steps as i32;
        let bias1 = 1.0 - c.beta1.powi(t);
        let bias2 = 1.0 - c.beta2.powi(t);
        for ((name, var), g) in params.iter().zip(grads) {
            let p = var.as_tensor();
            let m = match self.m.get(name) {
                Some(m) => ((m * c.beta1)? + (g * (1.0 - c.beta1))?)?,
                None => (g * (1.0 - c.beta1))?,
            };
            let v = match self.v.get(name) {
                Some(v) => ((v * c.beta2)? + (g.sqr()? * (1.0 - c.beta2))?)?,
                None => (g.sqr()? * (1.0 - c.beta2))?,
            };
            let m_hat = (&m / bias1)?;
            let v_hat = (&v / bias2)?;
            let update = (m_hat / (v_hat.sqrt()? + c.eps)?)?;
            let update = (update + (p * c.weight_decay)?)?;
            var.set(&(p - (update * lr)?)?)?;
            self.m.insert(name.clone(), m);
            self.v.insert(name.clone(), v);
        }
        Ok(())
    }

    /// The moments as named tensors (`{name}.m`, `{name}.v`) for a checkpoint.
    pub fn state(&self) -> HashMap<String, Tensor> {
        let mut out = HashMap::new();
        for (k, t) in &self.m {
            out.insert(format!("{k}.m"), t.clone());
        }
        for (k, t) in &self.v {
            out.insert(format!("{k}.v"), t.clone());
        }
        out
    }

    /// Restores [`Self::state`] after `steps` updates.
    pub fn restore(
        config: AdamWConfig,
        steps: u64,
        state: &HashMap<String, Tensor>,
    ) -> TrainResult<Self> {
        let mut opt = Self::new(config);
        opt.steps = steps;
        for (k, t) in state {
            if let Some(name) = k.strip_suffix(".m") {
                opt.m.insert(name.to_string(), t.clone());
            } else if let Some(name) = k.strip_suffix(".v") {
                opt.v.insert(name.to_string(), t.clone());
            } else {
                return Err(TrainError::Checkpoint(format!(
                    "unexpected optimizer tensor `{k}`"
                )));
            }
        }
        Ok(opt)
    }
}

/// Scales `grads` so their global L2 norm is at most `max_norm`; returns the norm before.
pub fn clip_grad_norm(grads: &mut [Tensor], max_norm: f64) -> TrainResult<f64> {
    let mut sq = 0f64;
    for g in grads.iter() {
        sq += g.sqr()?.sum_all()?.to_scalar::<f32>()? as f64;
    }
    let norm = sq.sqrt();
    if norm > max_norm && norm > 0.0 {
        let factor = max_norm / norm;
        for g in grads.iter_mut() {
            *g = (&*g * factor)?;
        }
    }
    Ok(norm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn two_steps_match_a_hand_computation() -> TrainResult<()> {
        let config = AdamWConfig {
            beta1: 0.9,
            beta2: 0.99,
            eps: 1e-8,
            weight_decay: 0.1,
        };
        let p0 = [1.0f64, -2.0];
        let g = [[0.5f64, -0.25], [0.1, 0.3]];
        let lr = 0.01;
        let var = Var::from_vec(p0.iter().map(|&x| x as f32).collect(), 2, &Device::Cpu)?;
        let mut opt = AdamW::new(config);
        let params = [("w".to_string(), var.clone())];
        for gs in g {
            let gt = Tensor::from_vec(gs.iter().map(|&x| x as f32).collect(), 2, &Device::Cpu)?;
            opt.step(&params, &[gt], lr)?;
        }
        // By hand, in f64.
        let mut expected = Vec::new();
        for i in 0..2 {
            let (mut p, mut m, mut v) = (p0[i], 0.0, 0.0);
            for (t, gs) in g.iter().enumerate() {
                let t = t as i32 + 1;
                m = 0.9 * m + 0.1 * gs[i];
                v = 0.99 * v + 0.01 * gs[i] * gs[i];
                let m_hat = m / (1.0 - 0.9f64.powi(t));
                let v_hat = v / (1.0 - 0.99f64.powi(t));
                p -= lr * (m_hat / (v_hat.sqrt() + 1e-8) + 0.1 * p);
            }
            expected.push(p);
        }
        let got = var.as_tensor().to_vec1::<f32>()?;
        for (g, e) in got.iter().zip(&expected) {
            assert!((*g as f64 - e).abs() < 1e-6, "{got:?} vs {expected:?}");
        }
        Ok(())
    }

    #[test]
    fn clipping_scales_to_the_bound_and_reports_the_norm() -> TrainResult<()> {
        let mut grads = vec![
            Tensor::new(&[3.0f32, 0.0], &Device::Cpu)?,
            Tensor::new(&[4.0f32], &Device::Cpu)?,
        ];
        let norm = clip_grad_norm(&mut grads, 1.0)?;
        assert!((norm - 5.0).abs() < 1e-6);
        assert_eq!(grads[0].to_vec1::<f32>()?, vec![0.6, 0.0]);
        assert_eq!(grads[1].to_vec1::<f32>()?, vec![0.8]);
        let mut small = vec![Tensor::new(&[0.3f32], &Device::Cpu)?];
        clip_grad_norm(&mut small, 1.0)?;
        assert_eq!(small[0].to_vec1::<f32>()?, vec![0.3]);
        Ok(())
    }
}
