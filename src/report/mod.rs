//! Replay's rendering, shared by `replay`, `run` and `report`: the text summary on stdout and
//! the HTML report.

pub mod html;
mod html_levels;
mod levels;
pub mod live;
mod summary;
mod sweep;
mod turn_eval;
mod turn_eval_html;

pub use levels::print_levels;
pub use summary::print_report;
pub use sweep::print_sweep;
pub use turn_eval::{print_choices, print_turn_eval};
pub use turn_eval_html::turn_eval_page;
