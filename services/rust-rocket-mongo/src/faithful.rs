//! The faithful variant: the behaviour of the study's Rust API
//! (ArturMarekNowak/DotnetGoRustBenchmark@025a8f9, src/rust/src: main.rs, controllers/,
//! repositories/users_repository.rs, models/user.rs), rewritten here, quirks included:
//!
//! * `/helloWorld` returns the `&'static str` `{"message:" "Hello world!"}`: not valid JSON
//!   (the colon sits inside the key's quotes), sent by Rocket as `text/plain; charset=utf-8`;
//! * `/users/<id>` parses the client options and builds a NEW `Client` for every request,
//!   runs `find_one({_id: id})` and drops the client; a missing document panics
//!   (`expect`), which Rocket answers with 500;
//! * the user is serialised with `_id` as its key: `{"_id":1,"name":...}`.

use mongodb::{bson::doc, error::Error, options::ClientOptions, Client};
use rocket::{http::Status, serde::json::Json, Build, Rocket, State};
use serde::{Deserialize, Serialize};

#[derive(Serialize, Deserialize, Debug)]
pub struct User {
    #[serde(rename = "_id")]
    pub id: u32,
    pub name: String,
    pub surname: String,
    pub email: String,
}

/// The MongoDB URL (the original hard-coded it in the repository function).
pub struct MongoUrl(pub String);

#[get("/helloWorld")]
pub fn hello_world() -> &'static str {
    "{\"message:\" \"Hello world!\"}"
}

#[get("/<id>")]
pub async fn get_user(id: u32, url: &State<MongoUrl>) -> Result<Json<User>, Status> {
    match find_user(id, &url.0).await {
        Ok(user) => Ok(Json(user)),
        Err(_) => Err(Status::NotFound),
    }
}

/// One client per call: parse the options, build the client, query, drop the client.
async fn find_user(id: u32, url: &str) -> Result<User, Error> {
    let options = ClientOptions::parse(url).await?;
    let client = Client::with_options(options)?;
    let users = client.database("mongo").collection::<User>("users");
    let user = users
        .find_one(doc! {"_id": id}, None)
        .await
        .expect("Couldn't find user")
        .expect("Couldn't deserialize user");
    Ok(user)
}

pub fn build(url: String) -> Rocket<Build> {
    rocket::build()
        .manage(MongoUrl(url))
        .mount("/", routes![hello_world])
        .mount("/users", routes![get_user])
}
