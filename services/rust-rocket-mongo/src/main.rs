//! rust-rocket-mongo: the Rust API of the DotnetGoRustBenchmark study (study 01).
//!
//! * `GET /helloWorld`: a small greeting;
//! * `GET /users/<id>`: one user document read from MongoDB (db `mongo`, collection `users`).
//!
//! `APP_VARIANT` picks the behaviour: `faithful` (see `faithful.rs`: the study's code, a new
//! client per request, the malformed helloWorld body; run as a debug build, as the study's
//! `cargo build` + `cargo run`) or `fair` (see `fair.rs`: one pooled client, the shared JSON
//! contract; run as a release build with Rocket's release log level).
//!
//! Rocket reads `ROCKET_ADDRESS` and `ROCKET_PORT` (as in the study's Dockerfile);
//! `CONNECTION_STRING` is the MongoDB URL (the study hard-coded
//! `mongodb://admin:admin@host.docker.internal:27017/?directConnection=true`).

#[macro_use]
extern crate rocket;

mod fair;
mod faithful;

#[launch]
async fn rocket() -> _ {
    let url = std::env::var("CONNECTION_STRING").expect("CONNECTION_STRING not set");
    let variant = std::env::var("APP_VARIANT").unwrap_or_else(|_| "fair".to_string());
    match variant.as_str() {
        "faithful" => faithful::build(url),
        "fair" => fair::build(url).await,
        other => panic!("APP_VARIANT={other:?}: expected one of faithful, fair"),
    }
}
