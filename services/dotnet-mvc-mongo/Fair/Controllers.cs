// The fair variant: the shared contract of every fair implementation of study 01.
//
// * GET /helloWorld answers {"message":"Hello world!"} as application/json;
// * GET /users/{id:int} answers {"id":1,"name":"Arthur","surname":"Morgan","email":"..."}
//   from one singleton collection (one MongoClient, one pool), one query per request;
//   404 {"error":"user not found"} for an unknown id.
using App.Models;
using Microsoft.AspNetCore.Mvc;
using MongoDB.Driver;

namespace App.Fair;

public sealed class HelloWorldController : ControllerBase
{
    [HttpGet("helloWorld")]
    public IActionResult GetHelloWorld() => Ok(new { message = "Hello world!" });
}

public sealed class UsersController : ControllerBase
{
    private readonly IMongoCollection<User> _users;

    public UsersController(IMongoCollection<User> users)
    {
        _users = users;
    }

    [HttpGet("users/{id:int}")]
    public async Task<IActionResult> GetUserAsync(int id, CancellationToken cancellationToken)
    {
        var user = await _users.Find(u => u.Id == id).FirstOrDefaultAsync(cancellationToken);
        return user is not null ? Ok(user) : NotFound(new { error = "user not found" });
    }
}
