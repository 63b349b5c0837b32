//! `terraform-provider-meson`: the plugin process Terraform starts (see the
//! library's documentation).

use terraform_provider_meson::{COOKIE_KEY, COOKIE_VALUE, serve};

fn main() -> std::process::ExitCode {
    if std::env::var(COOKIE_KEY).as_deref() != Ok(COOKIE_VALUE) {
        eprintln!(
            "This is meson's Terraform provider, a plugin: Terraform runs it, not you.\n\
             Install it with a dev_overrides block in your Terraform CLI configuration \
             (see docs/terraform/index.md) and run `terraform plan`."
        );
        return std::process::ExitCode::from(1);
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MESON_PROVIDER_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("cannot start: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(serve()) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("terraform-provider-meson: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
