//! Runs the in-memory API server in the foreground until Ctrl-C:
//! `cargo run -p weft-apiserver --example weft-apiserver -- --listen 127.0.0.1:6443 --control 127.0.0.1:6444 [--config config.json]`

use weft_apiserver::{run, Config, Listen};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut listen = "127.0.0.1:6443".to_string();
    let mut control = None;
    let mut config = Config::default();
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or(format!("{arg} needs a value"));
        match arg.as_str() {
            "--listen" => listen = value()?,
            "--control" => control = Some(value()?),
            "--config" => config = serde_json::from_slice(&std::fs::read(value()?)?)?,
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let api = vec![Listen::Addr(listen.parse()?)];
        let control = match control {
            Some(c) => Some(Listen::Addr(c.parse()?)),
            None => None,
        };
        eprintln!("serving on http://{listen}");
        run(config, api, control, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
