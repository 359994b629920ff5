//! Helpers for the hand-written ops' tests: fixed inputs and an elementwise comparison with
//! what candle derives for the same computation written in plain ops.

use candle_core::{Device, Tensor, Var};

/// A variable of `shape` filled with a fixed, irregular pattern in [-1, 1].
pub(crate) fn values(shape: &[usize], seed: u32) -> candle_core::Result<Var> {
    let n: usize = shape.iter().product();
    let data: Vec<f32> = (0..n as u32)
        .map(|i| {
            let h = i
                .wrapping_mul(2654435761)
                .wrapping_add(seed.wrapping_mul(40503))
                >> 8;
            (h % 2001) as f32 / 1000.0 - 1.0
        })
        .collect();
    Var::from_vec(data, shape, &Device::Cpu)
}

/// Asserts `a` and `b` equal within float tolerance, element by element.
pub(crate) fn assert_close(a: &Tensor, b: &Tensor, what: &str) -> candle_core::Result<()> {
    let (a, b) = (
        a.flatten_all()?.to_vec1::<f32>()?,
        b.flatten_all()?.to_vec1::<f32>()?,
    );
    assert_eq!(a.len(), b.len(), "{what}: lengths");
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        assert!(
            (x - y).abs() <= 1e-5 + 1e-4 * y.abs(),
            "{what}[{i}]: op {x}, plain ops {y}"
        );
    }
    Ok(())
}

/// Checks an op against its plain-ops version: same output, and the same gradient for every
/// input under a weighting of the outputs that gives each output element its own gradient.
pub(crate) fn assert_same_gradients(
    inputs: &[&Var],
    op: impl Fn() -> candle_core::Result<Tensor>,
    plain: impl Fn() -> candle_core::Result<Tensor>,
) -> candle_core::Result<()> {
    let fused = op()?;
    let reference = plain()?;
    assert_close(&fused, &reference, "output")?;
    let weights = values(fused.dims(), 99)?.as_tensor().detach();
    let g_fused = (fused * &weights)?.sum_all()?.backward()?;
    let g_plain = (reference * &weights)?.sum_all()?.backward()?;
    for (i, var) in inputs.iter().enumerate() {
        let x = g_fused
            .get(var.as_tensor())
            .expect("gradient through the op");
        let y = g_plain
            .get(var.as_tensor())
            .expect("gradient through plain ops");
        assert_close(x, y, &format!("gradient of input {i}"))?;
    }
    Ok(())
}
