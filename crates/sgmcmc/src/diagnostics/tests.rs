//! Agreement with ArviZ on fixed fixture chains.
//!
//! Chains: `src/fixtures/case_*.txt` (one chain per line, 17 significant digits), made by
//! `fixtures/make_fixtures.py` in the scratch crate. Reference values below are that
//! script's output, computed once with:
//! ArviZ 0.23.4, numpy 2.4.6, scipy 1.17.1

use super::*;

struct Expected {
    file: &'static str,
    rhat: f64,
    ess_bulk: f64,
    ess_tail: f64,
    ess_mean: f64,
    mcse_mean: f64,
    mean: f64,
    sd: f64,
    q05: f64,
    q95: f64,
}

// (a) 4x200 AR(1) phi=0.9; (b) same with chain 4 shifted by +1; (c) 2x57 odd length;
// (d) 4x150 AR(0.6) with Student-t(1.5) innovations; (e) 4x100 rounded AR(1) (ties);
// (f) a single chain of 64; (g) 3x9 iid normal.
const CASES: &[Expected] = &[
    // case a: shape (4, 200); az.summary r_hat = 1.0528803864815193
    Expected {
        file: include_str!("fixtures/case_a.txt"),
        rhat: 1.0528803864815193,
        ess_bulk: 88.87596676543545,
        ess_tail: 126.3756564239021,
        ess_mean: 88.70823171944787,
        mcse_mean: 0.20625583586134158,
        mean: -0.04619283725467047,
        sd: 1.9426215697060136,
        q05: -3.2370004272359445,
        q95: 3.281258532596133,
    },
    // case b: shape (4, 200); az.summary r_hat = 1.202109065687488
    Expected {
        file: include_str!("fixtures/case_b.txt"),
        rhat: 1.202109065687488,
        ess_bulk: 14.368218988239956,
        ess_tail: 78.22105454139225,
        ess_mean: 14.124750507662883,
        mcse_mean: 0.6598543733081004,
        mean: 0.202956831200829,
        sd: 2.4799246881653834,
        q05: -4.114331583428648,
        q95: 4.158651891006848,
    },
    // case c: shape (2, 57); az.summary r_hat = 1.0334528217772472
    Expected {
        file: include_str!("fixtures/case_c.txt"),
        rhat: 1.0334528217772472,
        ess_bulk: 59.9368435091888,
        ess_tail: 93.13843657019207,
        ess_mean: 60.090778370528554,
        mcse_mean: 0.14341445385907045,
        mean: 0.4054543255361473,
        sd: 1.1117236335256167,
        q05: -1.3896195953389334,
        q95: 1.988335096548431,
    },
    // case d: shape (4, 150); az.summary r_hat = 1.0120450234624625
    Expected {
        file: include_str!("fixtures/case_d.txt"),
        rhat: 1.0120450234624625,
        ess_bulk: 130.49225874098423,
        ess_tail: 192.21984475174492,
        ess_mean: 175.9578624824869,
        mcse_mean: 0.44401721500610203,
        mean: 0.48018874809018525,
        sd: 5.8898488168385414,
        q05: -5.577787251556423,
        q95: 6.264403626418242,
    },
    // case e: shape (4, 100); az.summary r_hat = 1.0790481281547613
    Expected {
        file: include_str!("fixtures/case_e.txt"),
        rhat: 1.0790481281547613,
        ess_bulk: 48.40852455932397,
        ess_tail: 128.55600311543628,
        ess_mean: 48.43836066330383,
        mcse_mean: 0.1832456415820139,
        mean: 0.0075,
        sd: 1.2753470214269749,
        q05: -2.0,
        q95: 2.0,
    },
    // case f: shape (1, 64); az.summary r_hat = f64::NAN
    Expected {
        file: include_str!("fixtures/case_f.txt"),
        rhat: f64::NAN,
        ess_bulk: 25.04763105510008,
        ess_tail: 47.103651268578666,
        ess_mean: 26.09209344383063,
        mcse_mean: 0.22878520434518212,
        mean: 0.4208004747024081,
        sd: 1.1686444410612702,
        q05: -1.2333919855310802,
        q95: 2.1704921835813353,
    },
    // case g: shape (3, 9); az.summary r_hat = 1.0151689045916334
    Expected {
        file: include_str!("fixtures/case_g.txt"),
        rhat: 1.0151689045916334,
        ess_bulk: 33.12506980107854,
        ess_tail: 33.12506980107854,
        ess_mean: 33.12506980107854,
        mcse_mean: 0.21291445386120655,
        mean: -0.02399375895990959,
        sd: 1.225415998232562,
        q05: -1.4390442792583789,
        q95: 2.3194578982407505,
    },
];

fn parse(file: &str) -> Vec<Vec<f64>> {
    file.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split_whitespace().map(|t| t.parse().unwrap()).collect())
        .collect()
}

/// Relative agreement to 1e-8 (NaN must match NaN). The residual differences to ArviZ
/// are floating-point summation order and FFT round-off, ~1e-14.
fn close(name: &str, case: &str, got: f64, want: f64) {
    if want.is_nan() {
        assert!(got.is_nan(), "case {case} {name}: got {got}, want NaN");
        return;
    }
    let tol = 1e-8 * want.abs().max(1e-3);
    assert!(
        (got - want).abs() <= tol,
        "case {case} {name}: got {got:.17}, want {want:.17}"
    );
}

#[test]
fn matches_arviz() {
    for (i, e) in CASES.iter().enumerate() {
        let case = char::from(b'a' + i as u8).to_string();
        let data = parse(e.file);
        let chains: Vec<&[f64]> = data.iter().map(Vec::as_slice).collect();
        close("rhat", &case, rhat(&chains), e.rhat);
        close("ess_bulk", &case, ess_bulk(&chains), e.ess_bulk);
        close("ess_tail", &case, ess_tail(&chains), e.ess_tail);
        close("ess_mean", &case, ess_mean(&chains), e.ess_mean);
        let s = summarize(&chains);
        close("summary.rhat", &case, s.rhat, e.rhat);
        close("summary.ess_bulk", &case, s.ess_bulk, e.ess_bulk);
        close("summary.ess_tail", &case, s.ess_tail, e.ess_tail);
        close("summary.mcse_mean", &case, s.mcse_mean, e.mcse_mean);
        close("summary.mean", &case, s.mean, e.mean);
        close("summary.sd", &case, s.sd, e.sd);
        close("summary.q05", &case, s.q05, e.q05);
        close("summary.q95", &case, s.q95, e.q95);
    }
}

#[test]
fn shifted_chain_is_flagged() {
    let a = parse(CASES[0].file);
    let b = parse(CASES[1].file);
    let a: Vec<&[f64]> = a.iter().map(Vec::as_slice).collect();
    let b: Vec<&[f64]> = b.iter().map(Vec::as_slice).collect();
    assert!(rhat(&a) < 1.1 && rhat(&b) > 1.2);
}
