//! The Poincaré ball (curvature −1): the hyperbolic space in which the de-semanticization paper
//! measures how far a schema item's representation moves when a question token is masked.

/// Maps a vector into the open unit ball: `tanh(|h|) · h / |h|` (the exponential map at the
/// origin). The zero vector stays at the origin.
pub fn project(h: &[f32]) -> Vec<f64> {
    let norm = h
        .iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt();
    if norm == 0.0 {
        return vec![0.0; h.len()];
    }
    let factor = norm.tanh() / norm;
    h.iter().map(|&x| f64::from(x) * factor).collect()
}

/// Möbius addition `x ⊕ y` in the unit ball.
pub fn mobius_add(x: &[f64], y: &[f64]) -> Vec<f64> {
    let xy: f64 = x.iter().zip(y).map(|(a, b)| a * b).sum();
    let xx: f64 = x.iter().map(|a| a * a).sum();
    let yy: f64 = y.iter().map(|b| b * b).sum();
    let den = 1.0 + 2.0 * xy + xx * yy;
    x.iter()
        .zip(y)
        .map(|(a, b)| ((1.0 + 2.0 * xy + yy) * a + (1.0 - xx) * b) / den)
        .collect()
}

/// Hyperbolic distance `2 · artanh(|(−a) ⊕ b|)` between two points of the ball. Points on or
/// past the boundary (only rounding puts them there) are pulled just inside, so the distance
/// stays finite.
pub fn distance(a: &[f64], b: &[f64]) -> f64 {
    let minus_a: Vec<f64> = a.iter().map(|x| -x).collect();
    let diff = mobius_add(&minus_a, b);
    let norm = diff.iter().map(|x| x * x).sum::<f64>().sqrt();
    2.0 * norm.min(1.0 - 1e-12).atanh()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The closed form `arcosh(1 + 2|a − b|² / ((1 − |a|²)(1 − |b|²)))`, an independent check.
    fn arcosh_distance(a: &[f64], b: &[f64]) -> f64 {
        let d2: f64 = a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum();
        let na: f64 = a.iter().map(|x| x * x).sum();
        let nb: f64 = b.iter().map(|x| x * x).sum();
        (1.0 + 2.0 * d2 / ((1.0 - na) * (1.0 - nb))).acosh()
    }

    #[test]
    fn distance_agrees_with_the_closed_form() {
        let points: [&[f32]; 4] = [
            &[0.3, -0.2, 0.1],
            &[1.5, 0.4, -0.9],
            &[-0.05, 0.0, 0.02],
            &[0.0, 2.0, 1.0],
        ];
        for a in points {
            for b in points {
                let (pa, pb) = (project(a), project(b));
                let (got, want) = (distance(&pa, &pb), arcosh_distance(&pa, &pb));
                assert!((got - want).abs() < 1e-9 * want.max(1.0), "{got} vs {want}");
                assert!(
                    (distance(&pb, &pa) - got).abs() < 1e-9 * got.max(1.0),
                    "not symmetric"
                );
            }
        }
    }

    #[test]
    fn projection_stays_inside_and_the_origin_is_neutral() {
        let p = project(&[3.0, 4.0]);
        let norm = p.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((norm - 5f64.tanh()).abs() < 1e-12);
        // Far out, tanh rounds to 1: the point lands on the boundary and distances stay finite.
        let edge = project(&[300.0, 400.0]);
        assert!(distance(&edge, &p).is_finite());
        assert_eq!(project(&[0.0, 0.0]), vec![0.0, 0.0]);
        let x = project(&[0.2, 0.1]);
        // 0 ⊕ x = x, and the distance from the origin is 2 · artanh(|x|).
        assert_eq!(mobius_add(&[0.0, 0.0], &x), x);
        let nx = x.iter().map(|v| v * v).sum::<f64>().sqrt();
        assert!((distance(&[0.0, 0.0], &x) - 2.0 * nx.atanh()).abs() < 1e-12);
        assert_eq!(distance(&x, &x), 0.0);
    }
}
