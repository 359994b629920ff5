//! The inputs of the hand-written ops: a CPU kernel's storage as one contiguous f32 slice, and
//! the storage of a tensor an op holds (a weight, a mask) on the backend its input is on.

use candle_core::{CpuStorage, CudaStorage, Layout, Storage};

/// Takes a held tensor's storage when it is on the CPU; the ops written once for every backend
/// are generic over this and [`cuda`].
pub(crate) fn cpu(storage: &Storage) -> Option<&CpuStorage> {
    match storage {
        Storage::Cpu(s) => Some(s),
        _ => None,
    }
}

/// Takes a held tensor's storage when it is on a GPU.
pub(crate) fn cuda(storage: &Storage) -> Option<&CudaStorage> {
    match storage {
        Storage::Cuda(s) => Some(s),
        _ => None,
    }
}

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
