//! Deterministic test inputs for the GEMMs' tests, so they need no `rand`.

/// A small deterministic generator (xorshift64*), so the tests need no `rand`.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// Values of mixed magnitudes: per 32-value block a scale from 1e-4 to 1e2, some blocks
    /// all zero, some values exactly zero, some large outliers.
    pub fn mixed(&mut self, len: usize) -> Vec<f32> {
        let mut v = Vec::with_capacity(len);
        while v.len() < len {
            let scale = 10f32.powf(self.unit() * 3.0 - 1.0);
            let kind = self.next_u64() % 16;
            for _ in 0..32.min(len - v.len()) {
                let x = match kind {
                    0 => 0.0,
                    1 => (self.next_u64() % 9) as f32 - 4.0,
                    _ if self.next_u64().is_multiple_of(50) => self.unit() * scale * 300.0,
                    _ if self.next_u64().is_multiple_of(20) => 0.0,
                    _ => self.unit() * scale,
                };
                v.push(x);
            }
        }
        v
    }
}
