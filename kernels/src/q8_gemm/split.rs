//! How the int8 GEMM cuts an `m × n` output into parallel tasks (shared by every path).

use rayon::prelude::*;

/// Rows per task: enough quantized activations to fill about half of a 1 MiB L2, so that
/// each weight column unit is read from memory once per row tile.
pub(super) fn tile_rows(row_bytes: usize, mr: usize) -> usize {
    ((512 * 1024) / row_bytes.max(1)).clamp(mr, 256) / mr * mr
}

/// Row tiles when there are enough of them for the threads, otherwise column chunks (each
/// computed into its own buffer and copied out).
pub(super) struct Split {
    pub m: usize,
    pub n: usize,
    /// Output columns per column unit (the last unit may be partial).
    pub unit_cols: usize,
    pub units: usize,
    /// Column chunks are a multiple of this many units.
    pub unit_align: usize,
    pub tile_rows: usize,
}

impl Split {
    /// `work(rows, units, out, stride)` fills `out`: `rows.len()` rows of `stride` floats whose
    /// first column is unit `units.start`'s first column.
    pub fn run<F>(&self, out: &mut [f32], work: F)
    where
        F: Fn(std::ops::Range<usize>, std::ops::Range<usize>, &mut [f32], usize) + Sync,
    {
        let (m, n, tile_rows) = (self.m, self.n, self.tile_rows);
        let threads = rayon::current_num_threads().max(1);
        if m.div_ceil(tile_rows) >= 2 * threads || self.units < 2 * self.unit_align * threads {
            out.par_chunks_mut(tile_rows * n)
                .enumerate()
                .for_each(|(t, out_tile)| {
                    let r0 = t * tile_rows;
                    let rows = out_tile.len() / n;
                    work(r0..r0 + rows, 0..self.units, out_tile, n);
                });
            return;
        }
        let chunk = self.units.div_ceil(2 * threads).div_ceil(self.unit_align) * self.unit_align;
        let parts: Vec<(usize, Vec<f32>)> = (0..self.units.div_ceil(chunk))
            .into_par_iter()
            .map(|c| {
                let u0 = c * chunk;
                let u1 = (u0 + chunk).min(self.units);
                let c0 = u0 * self.unit_cols;
                let cols = (u1 * self.unit_cols).min(n) - c0;
                let mut buf = vec![0f32; m * cols];
                work(0..m, u0..u1, &mut buf, cols);
                (c0, buf)
            })
            .collect();
        for (c0, buf) in parts {
            let cols = buf.len() / m;
            for (row, src) in buf.chunks_exact(cols).enumerate() {
                out[row * n + c0..row * n + c0 + cols].copy_from_slice(src);
            }
        }
    }
}
