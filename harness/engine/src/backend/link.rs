//! What the link faults (`partition`, `delay`, `loss`) do to one direction of a link, as one
//! model that every world carries out: the sim on its simulated links, the local backend in the
//! proxies that carry each client's traffic.
//!
//! The model is TCP's, since every link here carries TCP:
//! - a cut holds the bytes (segments are lost and retransmitted until the link heals; nothing is
//!   reset, the stream goes on whole afterwards, unless a timeout ended it first); a cut with
//!   `mode: reset` resets every connection across it instead, when it starts and while it
//!   lasts, as a rebooted peer answers;
//! - a delay makes each message arrive `latency ± jitter` later (uniformly), in the order sent,
//!   as `tc netem delay` does to a TCP stream;
//! - a loss of ratio p loses each message with probability p, and TCP retransmits it after its
//!   retransmission timeout: 200 ms (Linux's `TCP_RTO_MIN`, what a connection with a short
//!   round trip has), doubling for each further loss of the same message. So a lossy link is a
//!   slow link with spikes, never a broken stream.

use std::time::Duration;

use kubechaos_core::scenario::{Action, Ratio};

/// Linux's minimum retransmission timeout (`TCP_RTO_MIN`, 200 ms): what a lost segment waits on
/// a connection with a round trip of a few milliseconds.
pub(crate) const RTO_MIN: Duration = Duration::from_millis(200);

/// Linux gives up on a segment after `tcp_retries2` (15) retransmissions; far past any
/// scenario's window, but it bounds the draw.
const MAX_RETRANSMISSIONS: u32 = 15;

/// One fault's effect on one direction of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Effect {
    /// Nothing passes: held until the link heals, or (`reset`) every connection reset.
    Cut {
        /// Connections are reset rather than held.
        reset: bool,
    },
    /// Messages arrive later.
    Delay {
        /// Added to each message.
        latency: Duration,
        /// Plus or minus, uniformly.
        jitter: Duration,
    },
    /// Messages are lost and retransmitted.
    Loss(Ratio),
}

impl Effect {
    /// The effect of a link fault's action.
    pub(crate) fn of(action: &Action) -> Option<Effect> {
        match action {
            Action::Partition(p) => Some(Effect::Cut { reset: p.reset }),
            Action::Delay(d) => Some(Effect::Delay {
                latency: d.latency,
                jitter: d.jitter,
            }),
            Action::Loss(l) => Some(Effect::Loss(l.ratio)),
            _ => None,
        }
    }
}

/// The condition of one direction of a link: every fault on it, together.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct LinkState {
    /// Nothing passes.
    pub(crate) cut: bool,
    /// And every connection across it is reset (a cut with `mode: reset`).
    pub(crate) reset: bool,
    /// Added to every message (the delays on the link, summed).
    pub(crate) latency: Duration,
    /// Plus or minus (the jitters, summed).
    pub(crate) jitter: Duration,
    /// The chance a message is lost (the losses together: lost by any).
    pub(crate) loss: f64,
}

impl LinkState {
    /// The state that `effects` make together.
    pub(crate) fn of<'e>(effects: impl IntoIterator<Item = &'e Effect>) -> LinkState {
        let mut s = LinkState::default();
        let mut kept = 1.0;
        for e in effects {
            match e {
                Effect::Cut { reset } => {
                    s.cut = true;
                    s.reset |= *reset;
                }
                Effect::Delay { latency, jitter } => {
                    s.latency += *latency;
                    s.jitter += *jitter;
                }
                Effect::Loss(r) => kept *= 1.0 - r.get(),
            }
        }
        s.loss = 1.0 - kept;
        s
    }

    /// Whether messages are slowed (a delay or a loss): then each one waits [`LinkState::extra`].
    pub(crate) fn slowed(&self) -> bool {
        !self.latency.is_zero() || self.loss > 0.0
    }

    /// How much later than on a healthy link one message arrives, drawn with `uniform` (values
    /// in [0, 1)): its delay, and the retransmission timeouts of its losses.
    pub(crate) fn extra(&self, mut uniform: impl FnMut() -> f64) -> Duration {
        let mut d = self.latency;
        if !self.jitter.is_zero() {
            let j = self.jitter.as_secs_f64() * (2.0 * uniform() - 1.0);
            d = Duration::from_secs_f64((d.as_secs_f64() + j).max(0.0));
        }
        let mut rto = RTO_MIN;
        for _ in 0..MAX_RETRANSMISSIONS {
            if self.loss <= 0.0 || uniform() >= self.loss {
                break;
            }
            d += rto;
            rto *= 2;
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(values: &[f64]) -> impl FnMut() -> f64 + '_ {
        let mut i = 0;
        move || {
            let v = values[i % values.len()];
            i += 1;
            v
        }
    }

    #[test]
    fn effects_add_up_delays_and_combine_losses() {
        let s = LinkState::of(&[
            Effect::Delay {
                latency: Duration::from_secs(1),
                jitter: Duration::from_millis(100),
            },
            Effect::Delay {
                latency: Duration::from_secs(2),
                jitter: Duration::ZERO,
            },
            Effect::Loss(Ratio::new(0.5)),
            Effect::Loss(Ratio::new(0.5)),
        ]);
        assert!(!s.cut);
        assert_eq!(s.latency, Duration::from_secs(3));
        assert_eq!(s.jitter, Duration::from_millis(100));
        assert!((s.loss - 0.75).abs() < 1e-9, "{}", s.loss);
        assert!(LinkState::of(&[Effect::Cut { reset: false }]).cut);
        let both = LinkState::of(&[Effect::Cut { reset: false }, Effect::Cut { reset: true }]);
        assert!(both.cut && both.reset);
        assert_eq!(LinkState::of(&[]), LinkState::default());
        assert!(!LinkState::default().slowed());
    }

    #[test]
    fn jitter_spreads_the_latency_both_ways_and_never_below_zero() {
        let s = LinkState {
            latency: Duration::from_secs(3),
            jitter: Duration::from_millis(500),
            ..Default::default()
        };
        assert_eq!(s.extra(draws(&[0.0])), Duration::from_millis(2500));
        assert_eq!(s.extra(draws(&[0.5])), Duration::from_secs(3));
        assert!(s.extra(draws(&[0.999_999])) <= Duration::from_millis(3500));
        let wide = LinkState {
            latency: Duration::from_millis(10),
            jitter: Duration::from_millis(10),
            ..Default::default()
        };
        assert_eq!(wide.extra(draws(&[0.0])), Duration::ZERO);
    }

    /// A lost message waits TCP's retransmission timeout, doubling with each further loss.
    #[test]
    fn a_lost_message_arrives_after_the_retransmission_timeouts() {
        let s = LinkState {
            loss: 0.3,
            ..Default::default()
        };
        assert_eq!(s.extra(draws(&[0.9])), Duration::ZERO);
        assert_eq!(s.extra(draws(&[0.1, 0.9])), Duration::from_millis(200));
        assert_eq!(
            s.extra(draws(&[0.1, 0.1, 0.1, 0.9])),
            Duration::from_millis(200 + 400 + 800)
        );
    }
}
