//! Live progress of the actions being waited on, on stderr: one bar per
//! action on a terminal, else one line per state change (status or
//! progress), so logs of scripted runs stay readable.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use meson_types::action::Action;
use std::collections::HashMap;
use std::io::IsTerminal;
use std::sync::{Arc, Mutex, MutexGuard};
use uuid::Uuid;

enum Mode {
    Bars {
        multi: MultiProgress,
        bars: HashMap<Uuid, ProgressBar>,
    },
    Lines {
        last: HashMap<Uuid, (String, u8)>,
    },
}

/// Shows the actions' states as they come (cloneable: the waiting's
/// callback holds one).
#[derive(Clone)]
pub struct Progress {
    mode: Arc<Mutex<Mode>>,
}

fn style() -> ProgressStyle {
    ProgressStyle::with_template("{prefix:.bold} [{bar:30.cyan/blue}] {pos:>3}% {msg}")
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar())
}

fn error_text(a: &Action) -> String {
    a.error.as_ref().map_or_else(
        || "error".to_owned(),
        |e| format!("error: {} ({})", e.message, e.code),
    )
}

impl Progress {
    /// Bars when stderr is a terminal, lines otherwise; shows `actions`' first states.
    pub fn new(actions: &[Action]) -> Progress {
        let mode = if std::io::stderr().is_terminal() {
            Mode::Bars {
                multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
                bars: HashMap::new(),
            }
        } else {
            Mode::Lines {
                last: HashMap::new(),
            }
        };
        let p = Progress {
            mode: Arc::new(Mutex::new(mode)),
        };
        for a in actions {
            p.update(a);
        }
        p
    }

    fn lock(&self) -> MutexGuard<'_, Mode> {
        self.mode.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Shows one state of an action.
    pub fn update(&self, a: &Action) {
        match &mut *self.lock() {
            Mode::Bars { multi, bars } => {
                let bar = bars.entry(a.id).or_insert_with(|| {
                    let b = multi.add(ProgressBar::new(100).with_style(style()));
                    b.set_prefix(format!("{} {}", a.command, crate::output::short_id(&a.id)));
                    b
                });
                if bar.is_finished() {
                    return;
                }
                bar.set_position(u64::from(a.progress));
                match a.status.as_str() {
                    "success" => bar.finish_with_message("success"),
                    "error" => bar.abandon_with_message(error_text(a)),
                    s => bar.set_message(s.to_owned()),
                }
            }
            Mode::Lines { last } => {
                let state = (a.status.clone(), a.progress);
                if last.get(&a.id) == Some(&state) {
                    return;
                }
                last.insert(a.id, state);
                let extra = if a.status == "error" {
                    format!(" {}", error_text(a))
                } else {
                    String::new()
                };
                eprintln!(
                    "action {} {}: {} {}%{extra}",
                    a.id, a.command, a.status, a.progress
                );
            }
        }
    }

    /// A callback for `WaitOpts::on_update`.
    pub fn callback(&self) -> Box<dyn FnMut(&Action) + Send> {
        let p = self.clone();
        Box::new(move |a| p.update(a))
    }

    /// Leaves the bars of actions still running where they are. When the
    /// wait was cut short (Ctrl-C), what follows starts on a line of its
    /// own: the cursor sits at the end of the last bar, where the terminal
    /// also echoed `^C`.
    pub fn finish(&self) {
        if let Mode::Bars { bars, .. } = &mut *self.lock() {
            let mut cut = false;
            for b in bars.values() {
                if !b.is_finished() {
                    b.abandon();
                    cut = true;
                }
            }
            if cut {
                eprint!("\r\n");
            }
        }
    }
}
