//! The input of a hand-written op's CPU kernel: its storage as one contiguous f32 slice.

use candle_core::{CpuStorage, Layout};

/// The f32 values `layout` selects from `storage`, which must be contiguous (the ops'
/// `forward` functions make their inputs so). `op` names the op in the error.
pub(crate) fn contiguous_f32<'a>(
    op: &str,
    storage: &'a CpuStorage,
    layout: &Layout,
) -> candle_core::Result<&'a [f32]> {
    let CpuStorage::F32(data) = storage else {
        candle_core::bail!("{op}: f32 inputs only");
    };
    let Some((start, end)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op}: inputs must be contiguous");
    };
    Ok(&data[start..end])
}
