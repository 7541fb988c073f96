//! Study 05's Rust server (seed 004, peterdeme/Grpc.Json.PerformanceTest): the seed's two
//! payloads as gRPC (tonic, code generated from payloads.proto) or as JSON over HTTP (axum
//! with serde_json, HTTP/1.1 and HTTP/2 over cleartext on the same port).
//!
//! APP_VARIANT=grpc serves /SmallPayloadService/SendSmallPayload and
//! /HugePayloadService/SendHugePayload; APP_VARIANT=json serves POST /small and POST /huge.
//! Both parse the request into its message type and build the response per call (as the
//! seed's gRPC server did). JSON bodies that do not parse are answered with 4xx (axum's Json
//! extractor). JSON casing: requests as the seed's client wrote them (PascalCase),
//! responses as its ASP.NET Core MVC server did (camelCase).
//!
//! Listens on $HOST:$PORT (default 127.0.0.1:8080); TCP_NODELAY on every connection, as
//! grpc-go and Go's net/http set it.

mod payloads;

use std::net::SocketAddr;

use axum::{routing::post, Json, Router};
use payloads::huge_payload_service_server::{HugePayloadService, HugePayloadServiceServer};
use payloads::small_payload_service_server::{SmallPayloadService, SmallPayloadServiceServer};
use payloads::{HugeRequest, HugeResponse, SmallRequest, SmallResponse};
use serde::{Deserialize, Serialize};
use tonic::{Request, Response, Status};

const HUGE_COUNT: usize = 150;

fn huge_lists() -> (Vec<String>, Vec<i32>) {
    (vec!["a".repeat(25); HUGE_COUNT], vec![123; HUGE_COUNT])
}

// -- gRPC ------------------------------------------------------------------------------------

struct Small;

#[tonic::async_trait]
impl SmallPayloadService for Small {
    async fn send_small_payload(&self, _req: Request<SmallRequest>) -> Result<Response<SmallResponse>, Status> {
        Ok(Response::new(SmallResponse { message: "SmallResponse".to_string() }))
    }
}

struct Huge;

#[tonic::async_trait]
impl HugePayloadService for Huge {
    async fn send_huge_payload(&self, _req: Request<HugeRequest>) -> Result<Response<HugeResponse>, Status> {
        let (string_list, int_list) = huge_lists();
        Ok(Response::new(HugeResponse { string_list, int_list }))
    }
}

async fn serve_grpc(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    tonic::transport::Server::builder()
        .tcp_nodelay(true)
        .add_service(SmallPayloadServiceServer::new(Small))
        .add_service(HugePayloadServiceServer::new(Huge))
        .serve(addr)
        .await?;
    Ok(())
}

// -- JSON over HTTP --------------------------------------------------------------------------

#[derive(Deserialize)]
#[allow(dead_code)]
struct SmallRequestJson {
    #[serde(rename = "Message")]
    message: String,
}

#[derive(Serialize)]
struct SmallResponseJson {
    message: String,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct HugeRequestJson {
    #[serde(rename = "StringList")]
    string_list: Vec<String>,
    #[serde(rename = "IntList")]
    int_list: Vec<i32>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HugeResponseJson {
    string_list: Vec<String>,
    int_list: Vec<i32>,
}

async fn small(Json(_req): Json<SmallRequestJson>) -> Json<SmallResponseJson> {
    Json(SmallResponseJson { message: "SmallResponse".to_string() })
}

async fn huge(Json(_req): Json<HugeRequestJson>) -> Json<HugeResponseJson> {
    let (string_list, int_list) = huge_lists();
    Json(HugeResponseJson { string_list, int_list })
}

async fn serve_json(addr: SocketAddr) -> Result<(), Box<dyn std::error::Error>> {
    let app = Router::new().route("/small", post(small)).route("/huge", post(huge));
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, app).tcp_nodelay(true).await?;
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let host = std::env::var("HOST").unwrap_or_else(|_| "127.0.0.1".into());
    let port = std::env::var("PORT").unwrap_or_else(|_| "8080".into());
    let addr: SocketAddr = format!("{host}:{port}").parse()?;
    let variant = std::env::var("APP_VARIANT").unwrap_or_default();
    eprintln!("{variant} server listening on {addr}");
    match variant.as_str() {
        "grpc" => serve_grpc(addr).await,
        "json" => serve_json(addr).await,
        other => Err(format!("APP_VARIANT={other:?}: valid: grpc, json").into()),
    }
}
