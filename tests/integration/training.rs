//! The training crate on small random checkpoints (gradients, resume, fitting) and on the real
//! Qwen tokenizer and Spider's train.json (the examples the server's prompts make).

use candle_core::{DType, Device, Tensor};
use quorum_models::{BatchLayout, DecoderModel, DenseKvCache, MatmulPolicy};
use quorum_tests::{QWEN_05B, max_abs_diff, model_path};
use quorum_training::{
    ALL_PROJECTIONS, AdamWConfig, ExampleOptions, LoraDecoder, LoraParams, LoraSpec, LrSchedule,
    PromptCodec, SelectorExampleOptions, SelectorRecord, TrainConfig, TrainKernels, Trainer,
    TrainingExample, answer_continuation, build_examples, build_selector_examples, export_merged,
    score_case, selection_accuracy, split_cases,
};
use quorum_weights::{load_checkpoint, load_lora_adapter};
use rand::{Rng, SeedableRng};

use crate::random_decoder::{VOCAB, write_checkpoint};

fn spec(targets: &[&str]) -> LoraSpec {
    LoraSpec {
        rank: 4,
        alpha: 8.0,
        dropout: 0.0,
        targets: targets.iter().map(|s| s.to_string()).collect(),
    }
}

fn tiny(arch: &str, seed: u64) -> (tempfile::TempDir, quorum_weights::Checkpoint) {
    let dir = tempfile::tempdir().unwrap();
    write_checkpoint(dir.path(), arch, seed);
    let ckpt = load_checkpoint(dir.path(), &Device::Cpu, DType::F32).unwrap();
    (dir, ckpt)
}

/// Gives every B matrix random values (PEFT starts them at zero, which hides B's effect).
fn randomize_b(lora: &LoraParams, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for (name, var) in lora.named_vars() {
        if name.ends_with("lora_B.weight") {
            let shape = var.as_tensor().shape().clone();
            let v: Vec<f32> = (0..shape.elem_count())
                .map(|_| rng.random_range(-0.3f32..0.3))
                .collect();
            var.set(&Tensor::from_vec(v, shape, &Device::Cpu).unwrap())
                .unwrap();
        }
    }
}

fn serving_last_logits(model: &DecoderModel, tokens: &[u32], adapter: Option<usize>) -> Tensor {
    let layout = BatchLayout::from_chunks([(0, 0, tokens.len(), true)]).with_adapters([adapter]);
    model
        .forward(tokens, &layout, &mut DenseKvCache::new())
        .unwrap()
        .squeeze(0)
        .unwrap()
}

/// The training forward equals the serving decoder, bare and with the adapter exported as PEFT
/// and loaded back the way the server loads adapters.
fn check_parity(arch: &str) {
    let (_dir, ckpt) = tiny(arch, 11);
    let trainable = LoraDecoder::load(&ckpt).unwrap();
    let lora = LoraParams::init(trainable.config(), spec(&ALL_PROJECTIONS), 5).unwrap();
    randomize_b(&lora, 6);
    let adapter_dir = tempfile::tempdir().unwrap();
    lora.save_peft(
        adapter_dir.path(),
        "tiny",
        &serde_json::json!({}),
        candle_core::DType::F32,
    )
    .unwrap();
    let adapter = load_lora_adapter(adapter_dir.path(), "t", &Device::Cpu, DType::F32).unwrap();
    let mut serving = DecoderModel::load(&ckpt, &Device::Cpu, MatmulPolicy::QuantizedOnly).unwrap();
    let index = serving.add_adapter(&adapter).unwrap();
    let tokens: Vec<u32> = (0..23).map(|i| (i * 37 % VOCAB) as u32).collect();
    for len in [1, 9, 23] {
        for (lora, adapter) in [(None, None), (Some(&lora), Some(index))] {
            let ours = trainable
                .logits(lora, &tokens[..len], len - 1..len, None)
                .unwrap()
                .squeeze(0)
                .unwrap();
            let theirs = serving_last_logits(&serving, &tokens[..len], adapter);
            let (diff, scale) = max_abs_diff(&ours, &theirs).unwrap();
            assert!(
                diff <= 1e-4 * scale.max(1.0),
                "{arch}, {len} tokens, adapter {adapter:?}: logits differ by {diff} (scale {scale})"
            );
        }
    }
}

/// `quorum train --export-merged`: the adapter folded into the weights and written as a plain
/// Hugging Face directory loads without PEFT and computes what the base with the adapter does.
fn check_merged_export(arch: &str) {
    let (_dir, ckpt) = tiny(arch, 21);
    let trainable = LoraDecoder::load(&ckpt).unwrap();
    let lora = LoraParams::init(
        trainable.config(),
        spec(&["q_proj", "v_proj", "down_proj"]),
        7,
    )
    .unwrap();
    randomize_b(&lora, 8);
    let adapter_dir = tempfile::tempdir().unwrap();
    lora.save_peft(
        adapter_dir.path(),
        "tiny",
        &serde_json::json!({}),
        DType::F32,
    )
    .unwrap();
    let adapter = load_lora_adapter(adapter_dir.path(), "t", &Device::Cpu, DType::F32).unwrap();
    let merged_dir = tempfile::tempdir().unwrap();
    let report = export_merged(&ckpt, &adapter, merged_dir.path(), DType::F32).unwrap();
    assert_eq!(report.merged, adapter.modules.len());
    let merged = quorum_weights::load_hf_dir(merged_dir.path(), &Device::Cpu, DType::F32).unwrap();
    assert_eq!(
        quorum_models::DecoderConfig::from_checkpoint(&merged).unwrap(),
        *trainable.config(),
        "{arch}: config.json round-trips"
    );
    assert_eq!(merged.eos_token_ids, ckpt.eos_token_ids);
    let merged = LoraDecoder::load(&merged).unwrap();
    let tokens: Vec<u32> = (0..19).map(|i| (i * 29 % VOCAB) as u32).collect();
    let rows = 0..tokens.len();
    let with_adapter = trainable
        .logits(Some(&lora), &tokens, rows.clone(), None)
        .unwrap();
    let bare = trainable.logits(None, &tokens, rows.clone(), None).unwrap();
    let folded = merged.logits(None, &tokens, rows, None).unwrap();
    let (err, scale) = max_abs_diff(&folded, &with_adapter).unwrap();
    let (effect, _) = max_abs_diff(&bare, &with_adapter).unwrap();
    assert!(
        err <= 1e-4 * scale.max(1.0),
        "{arch}: merged vs adapter logits differ by {err} (scale {scale})"
    );
    assert!(
        effect > 1000.0 * err.max(1e-7),
        "{arch}: the adapter's effect ({effect}) is not far above the merge error ({err})"
    );
}

#[test]
fn merged_export_equals_the_adapter_qwen2() {
    check_merged_export("qwen2");
}

#[test]
fn merged_export_equals_the_adapter_llama() {
    check_merged_export("llama");
}

#[test]
fn training_forward_equals_serving_qwen2() {
    check_parity("qwen2");
}

#[test]
fn training_forward_equals_serving_llama() {
    check_parity("llama");
}

/// Backward's gradients of A and B entries against central finite differences of the loss.
#[test]
fn lora_gradients_match_finite_differences() {
    let (_dir, ckpt) = tiny("qwen2", 21);
    let model = LoraDecoder::load(&ckpt).unwrap();
    let lora =
        LoraParams::init(model.config(), spec(&["q_proj", "v_proj", "down_proj"]), 3).unwrap();
    randomize_b(&lora, 4);
    let tokens: Vec<u32> = (0..17).map(|i| (i * 29 % VOCAB) as u32).collect();
    let answer_start = 11;
    let loss = |lora: &LoraParams| -> f64 {
        model
            .answer_loss(Some(lora), &tokens, answer_start, None)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap() as f64
    };
    let grads = model
        .answer_loss(Some(&lora), &tokens, answer_start, None)
        .unwrap()
        .backward()
        .unwrap();
    let h = 1e-2f32;
    let mut checked = 0;
    for (name, var) in lora.named_vars() {
        let grad = grads
            .get(var.as_tensor())
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let base = var
            .as_tensor()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let shape = var.as_tensor().shape().clone();
        for &i in &[0, base.len() / 3, base.len() - 1] {
            let at = |delta: f32| {
                let mut v = base.clone();
                v[i] += delta;
                var.set(&Tensor::from_vec(v, shape.clone(), &Device::Cpu).unwrap())
                    .unwrap();
                loss(&lora)
            };
            let numeric = (at(h) - at(-h)) / (2.0 * h as f64);
            at(0.0);
            let analytic = grad[i] as f64;
            assert!(
                (analytic - numeric).abs() <= 2e-3 + 2e-2 * numeric.abs(),
                "{name}[{i}]: backward {analytic}, finite difference {numeric}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3 * 2 * 2 * 3, "every matrix checked");
}

/// The plain-ops decoder (the path on a GPU, where the hand-written ops have no kernels) gives
/// the fused one's loss and gradients, with dropout on (the same seeded masks), so a run on a
/// GPU trains what a run on the CPU does.
#[test]
fn plain_kernels_give_the_fused_kernels_loss_and_gradients() {
    for arch in ["qwen2", "llama"] {
        let (_dir, ckpt) = tiny(arch, 31);
        let fused = LoraDecoder::load(&ckpt).unwrap();
        let plain = LoraDecoder::load_with(&ckpt, &Device::Cpu, TrainKernels::Plain).unwrap();
        let lora = LoraParams::init(fused.config(), spec(&ALL_PROJECTIONS), 7).unwrap();
        randomize_b(&lora, 8);
        let tokens: Vec<u32> = (0..29).map(|i| (i * 41 % VOCAB) as u32).collect();
        let run = |model: &LoraDecoder| {
            let mut rng = rand::rngs::StdRng::seed_from_u64(9);
            let loss = model
                .answer_loss(Some(&lora), &tokens, 17, Some((0.1, &mut rng)))
                .unwrap();
            let grads = loss.backward().unwrap();
            let grads: Vec<Tensor> = lora
                .named_vars()
                .iter()
                .map(|(_, v)| grads.get(v.as_tensor()).unwrap().clone())
                .collect();
            (loss.to_scalar::<f32>().unwrap(), grads)
        };
        let (fused_loss, fused_grads) = run(&fused);
        let (plain_loss, plain_grads) = run(&plain);
        assert!(
            (fused_loss - plain_loss).abs() <= 1e-5 * plain_loss.abs().max(1.0),
            "{arch}: loss {fused_loss} fused, {plain_loss} plain"
        );
        for ((name, _), (f, p)) in lora
            .named_vars()
            .iter()
            .zip(fused_grads.iter().zip(&plain_grads))
        {
            let (diff, scale) = max_abs_diff(f, p).unwrap();
            assert!(
                diff <= 1e-4 * scale.max(1e-3),
                "{arch} {name}: gradients differ by {diff} (scale {scale})"
            );
        }
    }
}

fn toy_examples() -> Vec<TrainingExample> {
    (0..5u32)
        .map(|k| TrainingExample {
            tokens: (0..14).map(|i| (i * 7 + k * 13) % VOCAB as u32).collect(),
            answer_start: 9,
        })
        .collect()
}

fn toy_config(steps: u64, dropout: f32) -> TrainConfig {
    TrainConfig {
        lora: LoraSpec {
            dropout,
            ..spec(&ALL_PROJECTIONS)
        },
        optimizer: AdamWConfig::default(),
        schedule: LrSchedule {
            peak: 1e-2,
            warmup_steps: 2,
            total_steps: steps,
            final_fraction: 0.1,
        },
        grad_accumulation: 2,
        max_grad_norm: 1.0,
        seed: 9,
    }
}

fn bits(trainer: &Trainer<'_>) -> Vec<(String, Vec<u32>)> {
    trainer
        .lora()
        .named_vars()
        .into_iter()
        .map(|(n, v)| {
            let values = v
                .as_tensor()
                .flatten_all()
                .unwrap()
                .to_vec1::<f32>()
                .unwrap();
            (n, values.iter().map(|x| x.to_bits()).collect())
        })
        .collect()
}

/// Two steps, a checkpoint, a fresh trainer resumed from it: its third step is bit for bit the
/// third step of a run that never stopped (dropout and data order included).
#[test]
fn resume_takes_the_identical_next_step() {
    let (_dir, ckpt) = tiny("llama", 31);
    let model = LoraDecoder::load(&ckpt).unwrap();
    let examples = toy_examples();
    let config = toy_config(6, 0.1);
    let mut straight = Trainer::new(&model, &examples, config.clone()).unwrap();
    let mut reports = Vec::new();
    for _ in 0..3 {
        reports.push(straight.step().unwrap());
    }
    let mut first = Trainer::new(&model, &examples, config.clone()).unwrap();
    first.step().unwrap();
    first.step().unwrap();
    let ckpt_dir = tempfile::tempdir().unwrap();
    first.save(ckpt_dir.path()).unwrap();
    drop(first);
    let mut resumed = Trainer::resume(&model, &examples, config.clone(), ckpt_dir.path()).unwrap();
    assert_eq!(resumed.steps_done(), 2);
    let third = resumed.step().unwrap();
    assert_eq!(third.loss.to_bits(), reports[2].loss.to_bits());
    assert_eq!(third.lr, reports[2].lr);
    assert_eq!(bits(&resumed), bits(&straight));
    // Another configuration must not resume from it.
    let other = toy_config(7, 0.1);
    assert!(Trainer::resume(&model, &examples, other, ckpt_dir.path()).is_err());
}

/// A finished adapter, stored as PEFT in bf16, is where a new run can start: every matrix is
/// the stored one widened to f32, and the run trains on from it; an adapter of another shape
/// is refused, naming both shapes.
#[test]
fn a_run_starts_from_a_finished_peft_adapter() {
    let (_dir, ckpt) = tiny("qwen2", 41);
    let model = LoraDecoder::load(&ckpt).unwrap();
    let finished = LoraParams::init(model.config(), spec(&ALL_PROJECTIONS), 3).unwrap();
    randomize_b(&finished, 4);
    let adapter_dir = tempfile::tempdir().unwrap();
    finished
        .save_peft(
            adapter_dir.path(),
            "tiny",
            &serde_json::json!({}),
            DType::BF16,
        )
        .unwrap();
    let examples = toy_examples();
    let mut trainer = Trainer::new(&model, &examples, toy_config(4, 0.0)).unwrap();
    trainer.lora().load_peft(adapter_dir.path()).unwrap();
    let stored = finished.named_vars();
    let started = trainer.lora().named_vars();
    assert_eq!(started.len(), stored.len());
    for ((name, ours), (stored_name, theirs)) in started.iter().zip(&stored) {
        assert_eq!(name, stored_name);
        let want = theirs
            .as_tensor()
            .to_dtype(DType::BF16)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        let (diff, _) = max_abs_diff(ours.as_tensor(), &want).unwrap();
        assert_eq!(diff, 0.0, "{name}");
    }
    let before = bits(&trainer);
    assert!(trainer.step().unwrap().loss.is_finite());
    assert_ne!(bits(&trainer), before, "the step changed nothing");
    let wider = LoraParams::init(
        model.config(),
        LoraSpec {
            rank: 8,
            ..spec(&ALL_PROJECTIONS)
        },
        1,
    )
    .unwrap();
    let err = wider.load_peft(adapter_dir.path()).unwrap_err().to_string();
    assert!(err.contains("rank 4") && err.contains("rank 8"), "{err}");
}

/// A few steps fit five short sequences: the loss falls well below where it started.
#[test]
fn training_fits_a_tiny_dataset() {
    let (_dir, ckpt) = tiny("qwen2", 41);
    let model = LoraDecoder::load(&ckpt).unwrap();
    let examples = toy_examples();
    let mut trainer = Trainer::new(&model, &examples, toy_config(40, 0.0)).unwrap();
    let mean_loss = |t: &Trainer<'_>| -> f64 {
        examples
            .iter()
            .map(|e| {
                model
                    .answer_loss(Some(t.lora()), &e.tokens, e.answer_start, None)
                    .unwrap()
                    .to_scalar::<f32>()
                    .unwrap() as f64
            })
            .sum::<f64>()
            / examples.len() as f64
    };
    let before = mean_loss(&trainer);
    for _ in 0..40 {
        trainer.step().unwrap();
    }
    let after = mean_loss(&trainer);
    assert!(after < 0.5 * before, "loss {before} -> {after}");
}

/// The real Qwen2.5-Coder-0.5B checkpoint (f32) and Spider's data.
fn qwen_and_spider() -> (
    quorum_weights::Checkpoint,
    quorum_sql::dataset::SpiderDataset,
) {
    let ckpt = load_checkpoint(&model_path(QWEN_05B), &Device::Cpu, DType::F32).unwrap();
    let dataset = quorum_sql::dataset::SpiderDataset::new(quorum_tests::spider_dir());
    (ckpt, dataset)
}

/// How the trainer renders text for `ckpt`: its tokenizer, chat template and end of turn.
fn codec(ckpt: &quorum_weights::Checkpoint) -> PromptCodec<'_> {
    PromptCodec {
        tokenizer: &ckpt.tokenizer,
        chat_template: ckpt.chat_template.as_ref(),
        end_token: ckpt.eos_token_ids[0],
    }
}

/// Spider examples rendered with the real Qwen tokenizer and chat template: the prompt is the
/// pipeline's (ending in the answer prefix), the answer decodes to the gold continuation.
#[test]
fn spider_examples_carry_the_pipeline_prompt_and_the_gold_answer() {
    let (ckpt, dataset) = qwen_and_spider();
    let train: Vec<_> = dataset.train().unwrap().into_iter().take(40).collect();
    let codec = codec(&ckpt);
    let options = ExampleOptions {
        format: quorum_sql::pipeline::PromptFormat::Rep,
        linked_format: quorum_sql::pipeline::PromptFormat::Rep,
        max_tokens: 4096,
        linked_share: 0.5,
        augment_share: 0.0,
        seed: 1,
    };
    let (examples, stats) = build_examples(&dataset, &train, codec, &options).unwrap();
    assert_eq!(
        stats.kept + stats.not_select + stats.too_long,
        40,
        "{stats:?}"
    );
    assert_eq!(stats.too_long, 0, "{stats:?}");
    assert!(stats.kept >= 38, "{stats:?}");
    assert!(
        stats.linked_schema > 5 && stats.linked_schema < stats.kept,
        "{stats:?}"
    );
    let kept: Vec<_> = train
        .iter()
        .filter(|e| answer_continuation(&e.query).is_some())
        .collect();
    for (example, source) in examples.iter().zip(&kept) {
        let decode = |ids: &[u32]| ckpt.tokenizer.decode(ids, false).unwrap();
        let prompt = decode(&example.tokens[..example.answer_start]);
        assert!(prompt.contains(&source.question), "{prompt}");
        assert!(prompt.ends_with("```sql\nSELECT "), "{prompt}");
        let answer = &example.tokens[example.answer_start..];
        assert_eq!(*answer.last().unwrap(), ckpt.eos_token_ids[0]);
        assert_eq!(
            decode(&answer[..answer.len() - 1]),
            answer_continuation(&source.query).unwrap()
        );
    }
}

/// An adapter for a model that writes the PreSQL in RE_p and the FinSQL in SimpleDDL: the
/// examples that show only the gold query's tables are rendered in SimpleDDL, the others in
/// RE_p, each exactly as a build of one format renders it, and the same questions show the
/// linked tables whatever the formats.
#[test]
fn linked_examples_take_round_twos_format() {
    use quorum_sql::pipeline::PromptFormat::{Rep, SimpleDdl};
    let (ckpt, dataset) = qwen_and_spider();
    let train: Vec<_> = dataset.train().unwrap().into_iter().take(40).collect();
    let codec = codec(&ckpt);
    let build = |format, linked_format| {
        let options = ExampleOptions {
            format,
            linked_format,
            max_tokens: 4096,
            linked_share: 0.5,
            augment_share: 0.3,
            seed: 4,
        };
        build_examples(&dataset, &train, codec, &options).unwrap()
    };
    let (rep, rep_stats) = build(Rep, Rep);
    let (ddl, ddl_stats) = build(SimpleDdl, SimpleDdl);
    let (both, stats) = build(Rep, SimpleDdl);
    // The prompts' lengths differ; which questions train, and on which view, do not.
    for other in [&rep_stats, &ddl_stats] {
        assert_eq!(stats.kept, other.kept);
        assert_eq!(stats.linked_schema, other.linked_schema);
        assert_eq!(stats.augmented, other.augmented);
    }
    assert!(
        stats.linked_schema > 5 && stats.linked_schema < stats.kept,
        "{stats:?}"
    );
    let mut as_ddl = 0;
    for (i, example) in both.iter().enumerate() {
        assert_ne!(rep[i], ddl[i], "example {i} renders alike in both formats");
        if *example == ddl[i] {
            as_ddl += 1;
        } else {
            assert_eq!(*example, rep[i], "example {i} is in neither format");
        }
    }
    assert_eq!(as_ddl, stats.linked_schema);
}

/// With `augment_share` 1, a reworded copy of most questions trains too: its prompt asks
/// none of the original questions, its answer is a whole query, the originals are all still
/// there, and building them again gives the same examples.
#[test]
fn reworded_examples_train_beside_their_originals() {
    let (ckpt, dataset) = qwen_and_spider();
    let train: Vec<_> = dataset.train().unwrap().into_iter().take(40).collect();
    let codec = codec(&ckpt);
    let options = |augment_share| ExampleOptions {
        format: quorum_sql::pipeline::PromptFormat::MSchema,
        linked_format: quorum_sql::pipeline::PromptFormat::MSchema,
        max_tokens: 4096,
        linked_share: 0.5,
        augment_share,
        seed: 1,
    };
    let (plain, plain_stats) = build_examples(&dataset, &train, codec, &options(0.0)).unwrap();
    let (examples, stats) = build_examples(&dataset, &train, codec, &options(1.0)).unwrap();
    // A resumed run rebuilds its examples: they must come out the same every time.
    let (again, _) = build_examples(&dataset, &train, codec, &options(1.0)).unwrap();
    assert!(
        examples == again,
        "the reworded examples differ from one build to the next"
    );
    assert_eq!(plain_stats.augmented.variants, 0);
    let augmented = &stats.augmented;
    assert!(augmented.variants >= 20, "{stats:?}");
    assert!(augmented.words_replaced >= 20, "{stats:?}");
    assert!(augmented.values_replaced >= 1, "{stats:?}");
    assert_eq!(stats.kept, plain.len() + augmented.variants, "{stats:?}");
    let decode = |ids: &[u32]| ckpt.tokenizer.decode(ids, false).unwrap();
    let mut originals = 0;
    for example in &examples {
        let prompt = decode(&example.tokens[..example.answer_start]);
        let asks_an_original = train.iter().any(|e| prompt.contains(&e.question));
        originals += usize::from(asks_an_original);
        let answer = decode(&example.tokens[example.answer_start..example.tokens.len() - 1]);
        assert!(answer.ends_with("\n```"), "{answer}");
    }
    assert_eq!(originals, plain.len());
}

/// The selector's examples with the real Qwen tokenizer: each prompt is the pipeline's selection
/// prompt over the record's groups, and its answer is the label of the one group whose result
/// is the gold result; records with nothing to choose, or more than one right group, are left
/// out, and a record with no right group gets the gold query as a group of its own.
#[test]
fn selector_examples_label_the_group_with_the_gold_result() {
    let (ckpt, dataset) = qwen_and_spider();
    let codec = codec(&ckpt);
    let gold = "SELECT count(*) FROM head WHERE age  >  56";
    let record = |groups: &[&str]| SelectorRecord {
        db_id: "department_management".into(),
        question: "How many heads of the departments are older than 56 ?".into(),
        gold: gold.into(),
        linked_tables: vec!["head".into()],
        groups: groups.iter().map(|g| g.to_string()).collect(),
        votes: vec![1; groups.len()],
        split: true,
    };
    let right = "SELECT COUNT(*) FROM head WHERE age > 56";
    let wrong = "SELECT count(*) FROM head";
    let records = [
        // One right group among three: kept.
        record(&[wrong, right, "SELECT count(*) FROM head WHERE age < 56"]),
        // Nothing to choose.
        record(&[right]),
        // Two right groups (the vote split on column names): no single right label.
        record(&[right, "SELECT count(*) AS n FROM head WHERE age > 56"]),
        // No right group: the gold query joins as the right one.
        record(&[wrong, "SELECT no_such_column FROM head"]),
    ];
    let options = SelectorExampleOptions {
        max_groups: 5,
        preview_rows: 10,
        max_tokens: 4096,
        add_gold: true,
        orders: 3,
        seed: 0,
    };
    let (examples, stats) = build_selector_examples(&dataset, &records, codec, &options).unwrap();
    assert_eq!(
        (
            stats.records,
            stats.kept,
            stats.single_group,
            stats.several_correct,
            stats.gold_added
        ),
        (4, 5, 1, 1, 1),
        "{stats:?}"
    );
    assert_eq!(stats.answer_positions.iter().sum::<usize>(), 5);
    let decode = |ids: &[u32]| ckpt.tokenizer.decode(ids, false).unwrap();
    for (n, example) in examples.iter().enumerate() {
        let prompt = decode(&example.tokens[..example.answer_start]);
        assert!(
            prompt.contains("How many heads of the departments"),
            "{prompt}"
        );
        assert!(prompt.contains("# Table: head"), "{prompt}");
        assert!(
            !prompt.contains("# Table: department\n"),
            "linked tables only: {prompt}"
        );
        let answer = &example.tokens[example.answer_start..];
        assert_eq!(answer.len(), 1, "one label token");
        let label = decode(answer);
        let shown = prompt
            .split(&format!("Candidate {label}\n【SQL】\n"))
            .nth(1)
            .unwrap_or_else(|| panic!("no candidate {label}: {prompt}"));
        let sql = shown.lines().next().unwrap();
        // The gold query is shown as the pipeline shows its candidates: spaces collapsed.
        let expected = if n < 3 {
            right
        } else {
            "SELECT count(*) FROM head WHERE age > 56"
        };
        assert_eq!(sql, expected, "example {n}: {prompt}");
    }
    // Three orders of the same groups put the right one in more than one place.
    let labels: std::collections::BTreeSet<u32> = examples[..3]
        .iter()
        .map(|e| e.tokens[e.answer_start])
        .collect();
    assert!(labels.len() > 1, "{labels:?} {stats:?}");
}

/// The held-out split votes the selector is validated on: only records whose vote was split,
/// their groups in the vote's order (as the pipeline shows them, not shuffled), and each
/// label's score is the log-probability the training loss gives that label.
#[test]
fn selector_validation_scores_split_votes_in_the_vote_order() {
    let (ckpt, dataset) = qwen_and_spider();
    let codec = codec(&ckpt);
    let right = "SELECT COUNT(*) FROM head WHERE age > 56";
    let wrong = "SELECT count(*) FROM head";
    let record = |groups: &[&str], votes: &[usize], split: bool| SelectorRecord {
        db_id: "department_management".into(),
        question: "How many heads of the departments are older than 56 ?".into(),
        gold: "SELECT count(*) FROM head WHERE age  >  56".into(),
        linked_tables: vec!["head".into()],
        groups: groups.iter().map(|g| g.to_string()).collect(),
        votes: votes.to_vec(),
        split,
    };
    let records = [
        record(&[wrong, right], &[2, 1], true),
        // A majority: the pipeline does not ask.
        record(&[wrong, right], &[3, 1], false),
        // One group runs: nothing to choose.
        record(&[right, "SELECT no_such_column FROM head"], &[1, 1], true),
    ];
    // The same split vote again with a gold query that does not run: counted, not asked.
    let broken_gold = SelectorRecord {
        gold: "SELECT no_such_column FROM head".into(),
        ..record(&[wrong, right], &[2, 1], true)
    };
    let records = [records.as_slice(), &[broken_gold]].concat();
    let split = split_cases(&dataset, &records, codec, 5, 10).unwrap();
    assert_eq!(
        (split.split_records, split.unjudged, split.too_few_groups),
        (3, 1, 1)
    );
    let cases = split.cases;
    assert_eq!(cases.len(), 1);
    let case = &cases[0];
    assert_eq!(
        (case.right.as_slice(), case.votes.as_slice()),
        ([false, true].as_slice(), [2, 1].as_slice())
    );
    let decode = |ids: &[u32]| ckpt.tokenizer.decode(ids, false).unwrap();
    let prompt = decode(&case.prompt_tokens);
    assert!(
        prompt.contains(&format!("Candidate A\n【SQL】\n{wrong}\n")),
        "{prompt}"
    );
    assert_eq!(decode(&case.label_tokens[..1]), "A");
    assert_eq!(decode(&case.label_tokens[1..]), "B");

    let model = LoraDecoder::load(&ckpt).unwrap();
    let scores = score_case(&model, None, case).unwrap();
    for (label, score) in case.label_tokens.iter().zip(&scores) {
        let mut tokens = case.prompt_tokens.clone();
        tokens.push(*label);
        let loss = model
            .answer_loss(None, &tokens, case.prompt_tokens.len(), None)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!((score + loss).abs() < 1e-4, "{score} against -{loss}");
    }
    let accuracy = selection_accuracy(&cases, &[scores], &[0.0, 100.0]);
    assert_eq!((accuracy.reachable, accuracy.majority), (1, 0));
    // An overwhelming vote weight is the majority vote.
    assert_eq!(accuracy.weighed[1], (100.0, 0));
}
