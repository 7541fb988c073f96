// rust-actix-random: study 02's Rust row, the shared contract of the study's fair rows.
//
//   GET /api/values/{id}   a fresh 1,024-character string per request, drawn from the seed's
//                          63-character alphabet with rand's ThreadRng (one ChaCha12
//                          generator per worker thread: nothing shared between threads)
//   GET /api/values/fixed  1,024 characters generated once at start
//
// Both answer 200 with Content-Type text/plain; charset=utf-8 and Content-Length 1024 (and
// Date), on HTTP/1.1 keep-alive. No logging middleware. The worker count is actix's
// default: std::thread::available_parallelism(), i.e. the CPU affinity. Listens on $HOST
// (default 127.0.0.1) and $PORT (default 5000).
use actix_web::{web, web::Bytes, App, HttpResponse, HttpServer};
use rand::Rng;
use std::env;

const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";
const SIZE: usize = 1024;

fn random_bytes(n: usize) -> Vec<u8> {
    let mut rng = rand::thread_rng();
    (0..n).map(|_| ALPHABET[rng.gen_range(0..ALPHABET.len())]).collect()
}

fn text(body: impl Into<Bytes>) -> HttpResponse {
    HttpResponse::Ok().content_type("text/plain; charset=utf-8").body(body.into())
}

async fn random(_id: web::Path<String>) -> HttpResponse {
    text(random_bytes(SIZE))
}

async fn fixed(body: web::Data<Bytes>) -> HttpResponse {
    text(body.get_ref().clone()) // a reference count, not a copy
}

#[actix_web::main]
async fn main() -> std::io::Result<()> {
    let host = env::var("HOST").unwrap_or_else(|_| "127.0.0.1".to_string());
    let port: u16 = match env::var("PORT") {
        Ok(p) => p.parse().map_err(|e| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("PORT={p:?}: {e}"))
        })?,
        Err(_) => 5000,
    };
    let fixed_body = web::Data::new(Bytes::from(random_bytes(SIZE)));
    eprintln!("rust-actix-random listening on {host}:{port}");
    HttpServer::new(move || {
        App::new()
            .app_data(fixed_body.clone())
            // actix tries routes in order: the static path before the {id} pattern
            .route("/api/values/fixed", web::get().to(fixed))
            .route("/api/values/{id}", web::get().to(random))
    })
    .bind((host.as_str(), port))?
    .run()
    .await
}
