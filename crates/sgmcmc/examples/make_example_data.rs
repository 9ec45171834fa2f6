//! Writes small synthetic data sets next to the example run files, so that
//! `examples/logistic_npy.toml` and `examples/linear_csv.toml` run as they are:
//!
//! ```sh
//! cargo run --release --example make_example_data
//! cargo run --release -- run examples/logistic_npy.toml --out out/logistic
//! cargo run --release -- run examples/linear_csv.toml --out out/linear
//! ```
//!
//! Files: `examples/data/X.npy` (20,000 × 5, f32), `examples/data/y.npy` (0/1 labels) and
//! `examples/data/linear.csv` (columns x1..x3, y).

use ndarray::{Array1, Array2};
use ndarray_npy::write_npy;
use rand::{RngExt, SeedableRng};
use sgmcmc::rng::{ChainRng, fill_standard_normal};
use std::fmt::Write;
use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/data");
    std::fs::create_dir_all(&dir)?;
    let mut rng = ChainRng::seed_from_u64(2026);

    // Logistic regression: x ~ N(0, I₅), y ~ Bernoulli(σ(xᵀθ* + 0.5)).
    let (n, d) = (20_000, 5);
    let theta = [1.0, -0.5, 0.25, 0.0, 2.0];
    let mut x = vec![0.0; n * d];
    fill_standard_normal(&mut rng, &mut x);
    let y: Array1<f64> = x
        .chunks_exact(d)
        .map(|row| {
            let z: f64 = row.iter().zip(&theta).map(|(a, b)| a * b).sum::<f64>() + 0.5;
            f64::from(u8::from(rng.random::<f64>() < 1.0 / (1.0 + (-z).exp())))
        })
        .collect();
    let x32 = Array2::from_shape_vec((n, d), x.iter().map(|&v| v as f32).collect())?;
    write_npy(dir.join("X.npy"), &x32)?;
    write_npy(dir.join("y.npy"), &y)?;

    // Linear regression: y = 1 + 2·x1 − x2 + 0·x3 + N(0, 0.5²).
    let mut csv = String::from("x1,x2,x3,y\n");
    let mut row = [0.0; 4];
    for _ in 0..5_000 {
        fill_standard_normal(&mut rng, &mut row);
        let y = 1.0 + 2.0 * row[0] - row[1] + 0.5 * row[3];
        writeln!(csv, "{},{},{},{}", row[0], row[1], row[2], y)?;
    }
    std::fs::write(dir.join("linear.csv"), csv)?;
    println!("wrote {}/X.npy, y.npy, linear.csv", dir.display());
    Ok(())
}
