// dotnet-mvc-mongo: the .NET API of the DotnetGoRustBenchmark study (study 01).
//
//   GET /helloWorld   a small greeting
//   GET /users/{id}   one user document read from MongoDB (db "mongo", collection "users")
//
// As the study: Host.CreateDefaultBuilder + Startup, MVC controllers, appsettings.json with
// Logging Default=Information and Microsoft.AspNetCore=Warning (no per-request log line).
// APP_VARIANT picks the controllers and services (see Startup.cs): "faithful" (the study's
// code behaviour) or "fair" (the shared contract, one pooled client).
//
// The MongoDB URL is the configuration key Databases:UsersDb:ConnectionString, which the
// runtime sets through the environment (Databases__UsersDb__ConnectionString). HOST and PORT
// give the listen address (the study's image listened on every interface, port 8080).
using App;

public class Program
{
    public static void Main(string[] args)
    {
        CreateHostBuilder(args).Build().Run();
    }

    public static IHostBuilder CreateHostBuilder(string[] args) =>
        Host.CreateDefaultBuilder(args)
            .ConfigureWebHostDefaults(webBuilder =>
            {
                var host = Environment.GetEnvironmentVariable("HOST") ?? "127.0.0.1";
                var port = Environment.GetEnvironmentVariable("PORT") ?? "8080";
                webBuilder.UseUrls($"http://{host}:{port}");
                webBuilder.UseStartup<Startup>();
            });
}
