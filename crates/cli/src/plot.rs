//! `granary plot`: charts from benchmark JSON results.
//!
//! Reads files written by `granary bench … --json FILE` ([`input`]), turns
//! them into figures ([`charts`]) and draws each as PNG and SVG
//! ([`render`]) under `--out`:
//!
//! - `throughput`: throughput vs threads, a line per benchmark, protocol and
//!   differing configuration;
//! - `contention`: throughput and aborts vs a configuration field (`--x`),
//!   grouped bars when the field takes fewer than 3 values;
//! - `timeseries`: completed transactions in each second, per file;
//! - `latency`: the latency CDF of each file;
//! - `breakdown`: where each transaction type's time went (`--breakdown`);
//! - `configs`: throughput per configuration (`bench --label`), or each
//!   protocol's per configuration for results of several protocols.
//!
//! Text is drawn with DejaVu Sans compiled into the binary (the `dejavu`
//! crate; DejaVu's license is the Bitstream Vera one, permissive), through
//! plotters' pure-Rust `ab_glyph` backend: charts come out the same on a
//! machine with no fonts and no fontconfig.

mod charts;
mod input;
mod render;
mod text;

use std::path::PathBuf;

use ab_glyph::FontRef;
use clap::{Args, ValueEnum};
use plotters::style::{register_font, FontStyle};

pub use charts::median;
use charts::{Built, Unbuilt};
pub use input::lookup;
use input::Run;
pub use render::Format;

/// Charts `granary plot` can draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Kind {
    /// Throughput vs threads.
    Throughput,
    /// Throughput and aborts vs the config field named by --x (grouped
    /// bars, a group per value, when it takes fewer than 3 values).
    Contention,
    /// Throughput in each second of each run.
    Timeseries,
    /// Latency CDF of each run.
    Latency,
    /// Time breakdown per transaction type (runs made with --breakdown).
    Breakdown,
    /// Throughput per configuration, a bar each (the median of the files
    /// of one `bench --label`, or of one configuration); for results of
    /// several protocols, a group per configuration and a bar per
    /// protocol. With `all`, drawn when some file has a label or several
    /// protocols.
    Configs,
    /// Every chart the files support; the others are skipped with a note.
    All,
}

impl Kind {
    const EVERY: [Kind; 6] = [
        Kind::Throughput,
        Kind::Contention,
        Kind::Timeseries,
        Kind::Latency,
        Kind::Breakdown,
        Kind::Configs,
    ];

    /// The chart's file name without extension (`DIR/NAME.png`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Throughput => "throughput",
            Kind::Contention => "contention",
            Kind::Timeseries => "timeseries",
            Kind::Latency => "latency",
            Kind::Breakdown => "breakdown",
            Kind::Configs => "configs",
            Kind::All => "all",
        }
    }
}

#[derive(Args, Debug, Clone)]
pub struct PlotArgs {
    /// Result files written by `granary bench … --json FILE`.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Directory for the charts (created if missing); each chart is written
    /// as DIR/KIND.png and DIR/KIND.svg.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Which charts (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "all")]
    pub kind: Vec<Kind>,
    /// Image formats (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "png,svg")]
    pub format: Vec<Format>,
    /// The contention chart's x axis: a dotted path into the JSON such as
    /// config.theta, config.customers or config.remote_item_pct, a bare
    /// config field name, or `remote` (= config.remote_item_pct). Default:
    /// the one numeric config field that differs among the files.
    #[arg(long = "x", value_name = "FIELD")]
    pub x: Option<String>,
    /// Names to show instead of generated series names (`ycsb kv
    /// global_tid=false` → `Key-Value`): `granary reproduce` names its
    /// series as its report does.
    #[arg(skip)]
    pub names: Vec<(String, String)>,
}

/// Draw the charts `args` asks for and print their paths.
pub fn run(args: PlotArgs) -> Result<(), String> {
    let font = register_fonts()?;
    let runs = args
        .files
        .iter()
        .map(|f| Run::load(f))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    let explicit = !args.kind.contains(&Kind::All);
    let kinds: Vec<Kind> = if explicit {
        let mut k = args.kind.clone();
        let mut seen = Vec::new();
        k.retain(|x| {
            !seen.contains(x) && {
                seen.push(*x);
                true
            }
        });
        k
    } else {
        Kind::EVERY.to_vec()
    };
    let mut formats = args.format.clone();
    formats.sort_by_key(|f| f.extension());
    formats.dedup();
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("cannot create {}: {e}", args.out.display()))?;

    let mut drawn = 0;
    for kind in kinds {
        let built = match kind {
            Kind::Throughput => charts::throughput(&runs, explicit),
            Kind::Contention => charts::contention(&runs, args.x.as_deref()),
            Kind::Timeseries => charts::timeseries(&runs),
            Kind::Latency => charts::latency(&runs),
            Kind::Breakdown => charts::breakdown(&runs),
            Kind::Configs => charts::configs(&runs, explicit),
            Kind::All => unreachable!("`all` is expanded above"),
        };
        let Built { mut figure, notes } = match built {
            Ok(b) => b,
            Err(Unbuilt::Unsupported(why)) if !explicit => {
                eprintln!("granary plot: skipping {}: {why}", kind.name());
                continue;
            }
            Err(Unbuilt::Unsupported(why)) => return Err(format!("{}: {why}", kind.name())),
            Err(Unbuilt::Input(e)) => return Err(format!("{}: {e}", kind.name())),
        };
        for n in notes {
            eprintln!("granary plot: {n}");
        }
        figure.rename(&args.names);
        for &f in &formats {
            let path = args.out.join(format!("{}.{}", kind.name(), f.extension()));
            render::write(&figure, &path, f, &font)?;
            println!("{}", path.display());
        }
        drawn += 1;
    }
    if drawn == 0 {
        return Err("none of the charts can be drawn from these files".into());
    }
    Ok(())
}

/// Make DejaVu Sans plotters' "sans-serif", the only family the charts
/// use (bold and other styles fall back to it), and return it for bitmap
/// text.
fn register_fonts() -> Result<FontRef<'static>, String> {
    let bytes = dejavu::sans::regular();
    let bad = || "the embedded font (DejaVu Sans) could not be loaded".to_string();
    register_font("sans-serif", FontStyle::Normal, bytes).map_err(|_| bad())?;
    FontRef::try_from_slice(bytes).map_err(|_| bad())
}
