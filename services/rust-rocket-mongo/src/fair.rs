//! The fair variant: the study's Rust API with the quirks removed, matching the shared
//! contract of every fair implementation of study 01.
//!
//! * one `Client` (and so one connection pool), created and pinged at launch;
//! * `/helloWorld` answers `{"message":"Hello world!"}` as `application/json`;
//! * `/users/<id>` answers `{"id":1,"name":"Arthur","surname":"Morgan","email":"..."}`,
//!   404 for an unknown id, 500 on a database error (never a panic);
//! * run as a release build; Rocket's release profile logs at `critical`, so there is no
//!   per-request log line.

use mongodb::{bson::doc, Client, Collection};
use rocket::{http::Status, serde::json::Json, Build, Rocket, State};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
pub struct User {
    #[serde(rename(deserialize = "_id"))]
    pub id: i64,
    pub name: String,
    pub surname: String,
    pub email: String,
}

#[derive(Serialize)]
pub struct Message {
    message: &'static str,
}

#[get("/helloWorld")]
pub fn hello_world() -> Json<Message> {
    Json(Message { message: "Hello world!" })
}

#[get("/users/<id>")]
pub async fn get_user(id: i32, users: &State<Collection<User>>) -> Result<Json<User>, (Status, Json<serde_json::Value>)> {
    match users.find_one(doc! {"_id": id}, None).await {
        Ok(Some(user)) => Ok(Json(user)),
        Ok(None) => Err((Status::NotFound, Json(serde_json::json!({"error": "user not found"})))),
        Err(e) => Err((Status::InternalServerError, Json(serde_json::json!({"error": e.to_string()})))),
    }
}

pub async fn build(url: String) -> Rocket<Build> {
    let client = Client::with_uri_str(&url).await.expect("invalid CONNECTION_STRING");
    client
        .database("admin")
        .run_command(doc! {"ping": 1}, None)
        .await
        .expect("cannot reach MongoDB");
    let users: Collection<User> = client.database("mongo").collection("users");
    rocket::build().manage(users).mount("/", routes![hello_world, get_user])
}
