// The faithful variant: the behaviour of the study's .NET API
// (ArturMarekNowak/DotnetGoRustBenchmark@025a8f9, src/dotnet/src: Controllers/, Services/,
// Repositories/UsersRepository.cs), rewritten here, quirks included:
//
// * GET /helloWorld returns the C# string "{\"message\": \"Hello World!\"}" from a Task<string>
//   action, so MVC's StringOutputFormatter writes it as text/plain (capital W, a space after
//   the colon);
// * GET /users/{id:int} returns Ok(user) (System.Text.Json, camelCase) or NotFound(id).
using Microsoft.AspNetCore.Mvc;

namespace App.Faithful;

public sealed class HelloWorldController : ControllerBase
{
    [HttpGet("helloWorld")]
    public async Task<string> GetHelloWorld()
    {
        return "{\"message\": \"Hello World!\"}";
    }
}

public sealed class UsersController : ControllerBase
{
    private readonly UsersService _usersService;

    public UsersController(UsersService usersService)
    {
        _usersService = usersService;
    }

    [HttpGet("users/{id:int}")]
    public async Task<IActionResult> GetUserAsync(int id)
    {
        var user = await _usersService.GetUser(id);
        return user is not null ? Ok(user) : NotFound(id);
    }
}
