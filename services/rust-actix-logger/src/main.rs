// rust-actix-logger: the seed's actix-web server (ZanePearton/Rust-serve@07320bc,
// src/main.rs), unchanged except for where it listens: the seed bound "127.0.0.1:8080";
// this one binds $HOST (default 127.0.0.1) and $PORT (default 8080), so the runtime can
// choose the port. Everything else is the seed's: RUST_LOG forced to "actix_web=info" in
// code, env_logger (to stderr), Logger::default() (one access-log line per request), the
// HttpServer's default worker count, and a body-only response (no Content-Type set).

// Import necessary modules and types from the actix_web crate and standard library.
use actix_web::{middleware::Logger, web, App, HttpResponse, HttpServer, Responder};
use std::env;

// The main function is marked with `actix_web::main`, which sets up an async runtime.
#[actix_web::main]
async fn main() -> std::io::Result<()> {
    // Set the environment variable for logging level to "info" for actix_web logs
    // (as the seed does: this overrides any RUST_LOG given from outside).
    env::set_var("RUST_LOG", "actix_web=info");
    // Initialize the env_logger logger, which writes to stderr.
    env_logger::init();

    let host = env::var("HOST").unwrap_or_else(|_| "127.0.0.1".to_string());
    let port: u16 = match env::var("PORT") {
        Ok(p) => p.parse().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("PORT={p:?}: {e}"))
        })?,
        Err(_) => 8080,
    };

    HttpServer::new(|| {
        App::new()
            // Add the Logger middleware to log all incoming requests.
            .wrap(Logger::default())
            // Define a route for the root URL ("/") that handles GET requests.
            .route("/", web::get().to(root_handler))
    })
    .bind((host.as_str(), port))?
    .run()
    .await
}

// The handler: 200 OK with the seed's 38-byte body.
async fn root_handler() -> impl Responder {
    HttpResponse::Ok().body("Hello, World! This is a cool web test!")
}
