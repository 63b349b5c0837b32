//! Latency summaries, and the Markdown tables the report is made of.

use std::fmt::Write as _;
use std::time::Duration;

/// Latency percentiles of a set of samples.
#[derive(Clone, Copy, Debug)]
pub struct Latency {
    pub n: usize,
    pub p50: Duration,
    pub p90: Duration,
    pub p99: Duration,
    pub max: Duration,
}

impl Latency {
    /// Summarises `samples` (nearest-rank percentiles). Errors when empty: a
    /// run that measured nothing is not a result.
    pub fn of(samples: &mut [Duration]) -> anyhow::Result<Latency> {
        anyhow::ensure!(!samples.is_empty(), "no latency samples were taken");
        samples.sort_unstable();
        let at = |q: f64| {
            let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
            samples[rank - 1]
        };
        Ok(Latency {
            n: samples.len(),
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: samples[samples.len() - 1],
        })
    }
}

/// Milliseconds with a precision that suits their size.
pub fn ms(d: Duration) -> String {
    let v = d.as_secs_f64() * 1000.0;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Seconds, to two decimals.
pub fn secs(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

/// A rate, rounded to a whole number with thousands separated.
pub fn rate(per_sec: f64) -> String {
    let n = per_sec.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// `a / b` as `1.23×`.
pub fn ratio(a: f64, b: f64) -> String {
    if b <= 0.0 {
        return "n/a".into();
    }
    format!("{:.2}×", a / b)
}

/// Whether a goal was met, for the tables.
pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "**not met**" }
}

/// A Markdown table.
pub struct Table {
    title: String,
    head: Vec<String>,
    rows: Vec<Vec<String>>,
    notes: Vec<String>,
}

impl Table {
    pub fn new(title: impl Into<String>, head: &[&str]) -> Table {
        Table {
            title: title.into(),
            head: head.iter().map(|s| (*s).to_owned()).collect(),
            rows: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.head.len());
        self.rows.push(cells);
    }

    pub fn note(&mut self, note: impl Into<String>) {
        self.notes.push(note.into());
    }

    pub fn render(&self) -> String {
        let mut s = format!("### {}\n\n", self.title);
        let _ = writeln!(s, "| {} |", self.head.join(" | "));
        let align: Vec<&str> = self
            .head
            .iter()
            .enumerate()
            .map(|(i, _)| if i == 0 { "---" } else { "---:" })
            .collect();
        let _ = writeln!(s, "| {} |", align.join(" | "));
        for r in &self.rows {
            let _ = writeln!(s, "| {} |", r.join(" | "));
        }
        if !self.notes.is_empty() {
            s.push('\n');
            for n in &self.notes {
                let _ = writeln!(s, "{n}");
            }
        }
        s
    }
}

/// The machine's CPU time so far, all CPUs (`/proc/stat`, in ticks).
#[derive(Clone, Copy, Debug)]
pub struct CpuTimes {
    total: u64,
    steal: u64,
}

impl CpuTimes {
    /// Now; `None` where `/proc/stat` cannot be read.
    pub fn now() -> Option<CpuTimes> {
        Self::parse(&std::fs::read_to_string("/proc/stat").ok()?)
    }

    /// From `/proc/stat`'s first line: user, nice, system, idle, iowait,
    /// irq, softirq, steal (guest time is already in user).
    fn parse(stat: &str) -> Option<CpuTimes> {
        let fields: Vec<u64> = stat
            .lines()
            .next()?
            .strip_prefix("cpu ")?
            .split_whitespace()
            .take(8)
            .map(|f| f.parse().ok())
            .collect::<Option<_>>()?;
        (fields.len() == 8).then(|| CpuTimes {
            total: fields.iter().sum(),
            steal: fields[7],
        })
    }

    /// The share of the machine's CPU time a hypervisor gave other guests
    /// since `earlier`: figures taken while it was high are slower than the
    /// same code's on a machine of its own, by more than their ratios show.
    pub fn steal_since(&self, earlier: &CpuTimes) -> Option<f64> {
        let total = self.total.checked_sub(earlier.total)?;
        let steal = self.steal.checked_sub(earlier.steal)?;
        (total > 0).then(|| steal as f64 / total as f64)
    }
}

/// A line saying how much CPU time was stolen since `since`, if known.
pub fn stolen_since(since: Option<CpuTimes>, what: &str) -> String {
    match (since, CpuTimes::now()) {
        (Some(a), Some(b)) => match b.steal_since(&a) {
            Some(share) => format!(
                "CPU time stolen by the hypervisor during {what}: {:.0}%.\n",
                share * 100.0
            ),
            None => String::new(),
        },
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        let l = Latency::of(&mut v).unwrap();
        assert_eq!(l.p50, Duration::from_millis(50));
        assert_eq!(l.p99, Duration::from_millis(99));
        assert_eq!(l.max, Duration::from_millis(100));
        let mut one = vec![Duration::from_millis(7)];
        assert_eq!(Latency::of(&mut one).unwrap().p99, Duration::from_millis(7));
        assert!(Latency::of(&mut []).is_err());
    }

    #[test]
    fn rates_and_ratios_read_well() {
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(999.6), "1,000");
        assert_eq!(ratio(3.0, 2.0), "1.50×");
        assert_eq!(ratio(1.0, 0.0), "n/a");
    }

    #[test]
    fn steal_is_its_share_of_all_cpu_time_between_two_readings() {
        let a = CpuTimes::parse("cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 1 2 3\n").unwrap();
        let b = CpuTimes::parse("cpu  200 0 100 1500 20 0 0 180 0 0\n").unwrap();
        // 1,000 ticks in all between them, 140 of them stolen.
        assert_eq!(b.steal_since(&a), Some(0.14));
        assert_eq!(a.steal_since(&b), None);
        assert!(CpuTimes::parse("intr 1 2 3").is_none());
        assert!(CpuTimes::parse("cpu  1 2 3").is_none());
    }
}
