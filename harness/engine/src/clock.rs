//! Time, injectable. turmoil simulates tokio's time but not `SystemTime`, so everything that
//! writes a timestamp (a Lease's renewTime) asks a [`Clock`]; durations and sleeps use tokio's
//! time, which is real in a real process and virtual in the simulation.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A source of wall-clock timestamps.
pub trait Clock: Send + Sync {
    /// The current wall-clock time.
    fn wall(&self) -> Timestamp;
}

/// The machine's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn wall(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The simulation's clock: a fixed epoch plus the virtual time elapsed in the simulation.
#[derive(Clone, Copy, Debug)]
pub struct SimClock {
    /// The simulated wall-clock time at the start of the run.
    pub epoch: Timestamp,
}

impl Clock for SimClock {
    fn wall(&self) -> Timestamp {
        let elapsed = turmoil::sim_elapsed().unwrap_or_default();
        self.epoch + SignedDuration::from_millis(elapsed.as_millis() as i64)
    }
}

/// A small deterministic random number generator (SplitMix64): jitter must be reproducible from
/// the seed, and must not depend on a crate's choice of algorithm.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed and a name (so that every candidate gets its own stream).
    pub fn new(seed: u64, name: &str) -> Self {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in name.bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        Rng(seed ^ h)
    }

    /// A generator seeded from the wall clock, for real-time worlds whose draws need not
    /// repeat (a proxy's losses, the webhook's error ratio).
    pub(crate) fn from_time(name: &str) -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or_default();
        Rng::new(seed, name)
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A float in [0, 1).
    pub(crate) fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
