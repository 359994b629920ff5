//! quorum-training: supervised LoRA fine-tuning of the SQL generators.
//!
//! The base model is frozen and dequantized to f32 ([`LoraDecoder`]); only the LoRA pairs are
//! trained ([`LoraParams`]), with AdamW, warmup + cosine decay, gradient accumulation and
//! clipping ([`Trainer`]). Examples come from Spider-format data rendered by the pipeline's own
//! prompt code ([`build_examples`], with reworded variants: [`reword`]), so a trained adapter is asked at serving time exactly what
//! it learned from. Adapters are written as Hugging Face PEFT directories, which the server
//! loads as generators, or merged into the base as a plain model directory ([`export_merged`]).

mod adamw;
mod augment;
mod causal_attention;
mod dropout;
mod error;
mod examples;
mod frozen_factor;
mod frozen_matmul;
mod lora_decoder;
mod lora_params;
mod lora_projection;
mod merge;
mod op_input;
#[cfg(test)]
mod op_test_support;
mod rms_norm;
mod rotary;
mod schedule;
mod seed;
mod selector_examples;
mod selector_validation;
mod swiglu;
mod trainer;

pub use adamw::{AdamW, AdamWConfig, clip_grad_norm};
pub use augment::{AugmentStats, Synonyms, Variant, reword};
pub use causal_attention::CausalAttention;
pub use error::{TrainError, TrainResult};
pub use examples::{
    ExampleOptions, ExampleStats, PromptCodec, TrainingExample, answer_continuation,
    build_examples, render_example,
};
pub use frozen_factor::FrozenFactor;
pub use frozen_matmul::FrozenMatmul;
pub use lora_decoder::{Dropout, LoraDecoder, TrainKernels};
pub use lora_params::{ALL_PROJECTIONS, LoraPair, LoraParams, LoraSpec, module_name};
pub use lora_projection::LoraProjection;
pub use merge::{MergeReport, export_merged};
pub use rms_norm::RmsNorm;
pub use rotary::Rotary;
pub use schedule::LrSchedule;
pub use selector_examples::{
    SelectorExampleOptions, SelectorExampleStats, SelectorRecord, build_selector_examples,
};
pub use selector_validation::{
    SelectionAccuracy, SplitCase, SplitCases, score_case, selection_accuracy, split_cases,
};
pub use swiglu::SwiGlu;
pub use trainer::{StepReport, TrainConfig, Trainer};
