//! Launch shapes of the CUDA kernels: the one place that decides the grid and block of each,
//! used by the device launches and by the CPU emulation in the tests alike.

use thiserror::Error;

/// Threads of a block for the norm and the elementwise kernels (whole warps, at most 1,024).
pub const NORM_THREADS: u32 = 256;
pub const ELEMENTWISE_THREADS: u32 = 256;
/// Blocks of an elementwise launch at most; each thread then strides over the rest.
const ELEMENTWISE_MAX_BLOCKS: u32 = 8 * 1024;
pub const ROTARY_THREADS: u32 = 128;

// These mirror compile-time constants of the `.cu` files (shared memory is sized by them); a
// test checks them against the compiled kernels.
pub const ATTENTION_THREADS: u32 = 128;
/// Keys one attention block covers; longer contexts are split (flash-decoding).
pub const PARTITION: usize = 512;
pub const MAX_HEAD_DIM: usize = 256;
pub const SHRINK_THREADS: u32 = 256;
pub const EXPAND_THREADS: u32 = 256;
pub const ARGMAX_THREADS: u32 = 256;
pub const SAMPLE_THREADS: u32 = 256;
pub const SOFTMAX_THREADS: u32 = 256;
pub const PREFILL_THREADS: u32 = 128;
/// Query rows of one `prefill_attention` block.
pub const PREFILL_ROWS: usize = 32;
/// The largest head dimension `prefill_attention`'s shared memory holds.
pub const PREFILL_MAX_HEAD_DIM: usize = 128;
pub const MATMUL_THREADS: u32 = 256;
/// Rows and outputs of one `fixed_order_matmul` block.
pub const MATMUL_TILE: usize = 64;
/// Threads of a `skinny_matmul` block: a warp per output.
pub const SKINNY_THREADS: u32 = 128;
/// The most rows `skinny_matmul` takes; more go to cuBLAS, whose tiles then fill.
pub const SKINNY_MAX_ROWS: usize = 8;
/// The bytes `skinny_matmul` reads at once: an input row must be a whole number of them.
pub const SKINNY_PACK_BYTES: usize = 16;
/// The most weights one `skinny_matmul` launch multiplies the same rows by (q, k and v).
pub const SKINNY_MAX_WEIGHTS: usize = 3;
/// The most projections of one input whose LoRA deltas share a launch (q, k and v).
pub const LORA_MAX_GROUP: usize = 3;

/// The y and z grid dimensions' limit on every CUDA device.
const MAX_GRID_YZ: usize = 65_535;
/// The x dimension's.
const MAX_GRID_X: usize = i32::MAX as usize;

/// `grid` blocks of `threads` threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchShape {
    pub grid: (u32, u32, u32),
    pub threads: u32,
}

#[derive(Debug, Error, PartialEq, Eq)]
pub enum LaunchError {
    #[error("{what} is {value}, more than the kernel's limit of {limit}")]
    TooLarge {
        what: &'static str,
        value: usize,
        limit: usize,
    },
    #[error("{0} is 0: a launch of no blocks is an error on the device; skip it instead")]
    Empty(&'static str),
    #[error("{0}")]
    Shape(String),
}

/// A grid dimension: at least 1 and at most `limit`.
fn at_most(what: &'static str, value: usize, limit: usize) -> Result<u32, LaunchError> {
    if value == 0 {
        return Err(LaunchError::Empty(what));
    }
    if value > limit {
        return Err(LaunchError::TooLarge { what, value, limit });
    }
    Ok(value as u32)
}

/// One block per row.
pub fn add_rms_norm(rows: usize) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (at_most("rows", rows, MAX_GRID_X)?, 1, 1),
        threads: NORM_THREADS,
    })
}

/// A grid-stride loop over `n` elements.
pub fn elementwise(n: usize) -> LaunchShape {
    let blocks = n.div_ceil(ELEMENTWISE_THREADS as usize).max(1);
    LaunchShape {
        grid: (blocks.min(ELEMENTWISE_MAX_BLOCKS as usize) as u32, 1, 1),
        threads: ELEMENTWISE_THREADS,
    }
}

/// One block per token.
pub fn rotary_kv_write(tokens: usize, head_dim: usize) -> Result<LaunchShape, LaunchError> {
    if !head_dim.is_multiple_of(2) {
        return Err(LaunchError::Shape(format!(
            "rotary needs an even head dimension, not {head_dim}"
        )));
    }
    Ok(LaunchShape {
        grid: (at_most("tokens", tokens, MAX_GRID_X)?, 1, 1),
        threads: ROTARY_THREADS,
    })
}

/// The attention launch for `rows` query rows whose longest context is `max_context`, and the
/// number of partitions its scratch buffers hold per (row, head).
pub fn paged_attention(
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    rows: usize,
    max_context: usize,
) -> Result<(LaunchShape, usize), LaunchError> {
    if head_dim > MAX_HEAD_DIM {
        return Err(LaunchError::TooLarge {
            what: "head dimension",
            value: head_dim,
            limit: MAX_HEAD_DIM,
        });
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(LaunchError::Shape(format!(
            "{heads} query heads do not share {kv_heads} key/value heads evenly"
        )));
    }
    let parts = max_context.div_ceil(PARTITION).max(1);
    Ok((
        LaunchShape {
            grid: (
                at_most("heads", heads, MAX_GRID_X)?,
                at_most("query rows", rows, MAX_GRID_YZ)?,
                at_most("context partitions", parts, MAX_GRID_YZ)?,
            ),
            threads: ATTENTION_THREADS,
        },
        parts,
    ))
}

/// One block per (head, row); rows of one partition return at once.
pub fn paged_attention_reduce(heads: usize, rows: usize) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (
            at_most("heads", heads, MAX_GRID_X)?,
            at_most("query rows", rows, MAX_GRID_YZ)?,
            1,
        ),
        threads: ATTENTION_THREADS,
    })
}

/// One block per (row, rank, projection) for `projections` projections of one input.
pub fn lora_shrink(
    rows: usize,
    rank: usize,
    projections: usize,
) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (
            at_most("rows", rows, MAX_GRID_X)?,
            at_most("ranks", rank.max(1), MAX_GRID_YZ)?,
            at_most("projections", projections.max(1), LORA_MAX_GROUP)?,
        ),
        threads: SHRINK_THREADS,
    })
}

/// Along x the output blocks of each projection in turn (`outs`: their output counts), one row
/// of blocks per row.
pub fn lora_expand(rows: usize, outs: &[usize]) -> Result<LaunchShape, LaunchError> {
    at_most("projections", outs.len(), LORA_MAX_GROUP)?;
    let blocks: usize = outs
        .iter()
        .map(|out| out.div_ceil(EXPAND_THREADS as usize))
        .sum();
    Ok(LaunchShape {
        grid: (
            at_most("output blocks", blocks.max(1), MAX_GRID_X)?,
            at_most("rows", rows, MAX_GRID_YZ)?,
            1,
        ),
        threads: EXPAND_THREADS,
    })
}

/// Whether `prefill_attention` takes heads of `head_dim`: multiples of the tensor cores' 16, up
/// to its shared memory's [`PREFILL_MAX_HEAD_DIM`].
pub fn prefill_takes_head_dim(head_dim: usize) -> bool {
    head_dim > 0 && head_dim.is_multiple_of(16) && head_dim <= PREFILL_MAX_HEAD_DIM
}

/// One block per (query head, 32 rows of the chunk).
pub fn prefill_attention(
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    len: usize,
) -> Result<LaunchShape, LaunchError> {
    if head_dim > PREFILL_MAX_HEAD_DIM {
        return Err(LaunchError::TooLarge {
            what: "head dimension",
            value: head_dim,
            limit: PREFILL_MAX_HEAD_DIM,
        });
    }
    if !prefill_takes_head_dim(head_dim) {
        return Err(LaunchError::Shape(format!(
            "prefill attention needs a head dimension that is a multiple of 16, not {head_dim}"
        )));
    }
    if kv_heads == 0 || !heads.is_multiple_of(kv_heads) {
        return Err(LaunchError::Shape(format!(
            "{heads} query heads do not share {kv_heads} key/value heads evenly"
        )));
    }
    Ok(LaunchShape {
        grid: (
            at_most("heads", heads, MAX_GRID_X)?,
            at_most("row blocks", len.div_ceil(PREFILL_ROWS), MAX_GRID_YZ)?,
            1,
        ),
        threads: PREFILL_THREADS,
    })
}

pub fn causal_softmax(rows: usize) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (at_most("rows", rows, MAX_GRID_X)?, 1, 1),
        threads: SOFTMAX_THREADS,
    })
}

/// One block per 64 x 64 tile of the output: `x` across the outputs, `y` across the rows.
pub fn fixed_order_matmul(rows: usize, out: usize) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (
            at_most("output tiles", out.div_ceil(MATMUL_TILE), MAX_GRID_X)?,
            at_most("row tiles", rows.div_ceil(MATMUL_TILE), MAX_GRID_YZ)?,
            1,
        ),
        threads: MATMUL_THREADS,
    })
}

/// Whether `skinny_matmul` takes `rows` rows of `fan_in` elements of `elem_bytes` bytes each:
/// the one rule the launch checks and the projections follow (the rest go to cuBLAS). The rows'
/// 16-byte alignment is the device launch's own check, since only it sees the pointers.
pub fn skinny_matmul_takes(rows: usize, fan_in: usize, elem_bytes: usize) -> bool {
    (1..=SKINNY_MAX_ROWS).contains(&rows)
        && fan_in > 0
        && elem_bytes > 0
        && (fan_in * elem_bytes).is_multiple_of(SKINNY_PACK_BYTES)
}

/// One warp per output of the group's weights together (`out`, their outputs summed),
/// `SKINNY_THREADS / 32` outputs a block.
pub fn skinny_matmul(
    rows: usize,
    fan_in: usize,
    out: usize,
    elem_bytes: usize,
) -> Result<LaunchShape, LaunchError> {
    if !skinny_matmul_takes(rows, fan_in, elem_bytes) {
        return Err(LaunchError::Shape(format!(
            "skinny_matmul takes 1 to {SKINNY_MAX_ROWS} rows whose {fan_in} inputs of \
             {elem_bytes} bytes fill whole {SKINNY_PACK_BYTES}-byte packs, not {rows} rows"
        )));
    }
    let warps = (SKINNY_THREADS / 32) as usize;
    Ok(LaunchShape {
        grid: (
            at_most("output blocks", out.div_ceil(warps), MAX_GRID_X)?,
            1,
            1,
        ),
        threads: SKINNY_THREADS,
    })
}

pub fn argmax(rows: usize) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (at_most("rows", rows, MAX_GRID_X)?, 1, 1),
        threads: ARGMAX_THREADS,
    })
}

/// One block per row; its threads split the vocabulary into contiguous runs.
pub fn sample(rows: usize) -> Result<LaunchShape, LaunchError> {
    Ok(LaunchShape {
        grid: (at_most("rows", rows, MAX_GRID_X)?, 1, 1),
        threads: SAMPLE_THREADS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_contexts_are_split_and_oversized_shapes_refused() {
        let (shape, parts) = paged_attention(28, 4, 128, 64, 2_000).unwrap();
        assert_eq!(shape.grid, (28, 64, 4));
        assert_eq!(parts, 4);
        assert_eq!(paged_attention(28, 4, 128, 1, 1).unwrap().1, 1);
        assert!(matches!(
            paged_attention(28, 4, 512, 1, 1),
            Err(LaunchError::TooLarge { .. })
        ));
        assert!(matches!(
            paged_attention(28, 3, 128, 1, 1),
            Err(LaunchError::Shape(_))
        ));
        assert!(rotary_kv_write(1, 63).is_err());
        assert_eq!(argmax(0), Err(LaunchError::Empty("rows")));
        assert!(matches!(
            paged_attention(28, 4, 128, 0, 1),
            Err(LaunchError::Empty(_))
        ));
        assert_eq!(elementwise(10_000_000).grid.0, ELEMENTWISE_MAX_BLOCKS);
        assert_eq!(lora_shrink(64, 16, 3).unwrap().grid, (64, 16, 3));
        assert!(matches!(
            lora_shrink(64, 16, 4),
            Err(LaunchError::TooLarge { .. })
        ));
        // q, k and v of a 7B: 14, 2 and 2 blocks of outputs.
        assert_eq!(
            lora_expand(64, &[3_584, 512, 512]).unwrap().grid,
            (18, 64, 1)
        );
        assert_eq!(lora_expand(64, &[]), Err(LaunchError::Empty("projections")));
        assert_eq!(
            prefill_attention(28, 4, 128, 2_000).unwrap().grid,
            (28, 63, 1)
        );
        assert!(matches!(
            prefill_attention(28, 4, 40, 64),
            Err(LaunchError::Shape(_))
        ));
        assert!(matches!(
            prefill_attention(28, 4, 256, 64),
            Err(LaunchError::TooLarge { .. })
        ));
        assert_eq!(skinny_matmul(1, 3584, 512, 2).unwrap().grid, (128, 1, 1));
        assert_eq!(skinny_matmul(8, 3584, 37, 4).unwrap().grid, (10, 1, 1));
        assert!(matches!(
            skinny_matmul(9, 3584, 512, 2),
            Err(LaunchError::Shape(_))
        ));
        assert!(matches!(
            skinny_matmul(1, 3580, 512, 2),
            Err(LaunchError::Shape(_))
        ));
        assert_eq!(
            skinny_matmul(1, 64, 0, 2),
            Err(LaunchError::Empty("output blocks"))
        );
    }
}
