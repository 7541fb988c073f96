// dotnet-kestrel-random: study 02's Kestrel server, the post's Startup.cs (seed 001,
// malekpour's answer to kataras' "Iris Go vs .NET Core Kestrel in terms of HTTP
// performance") on .NET 8.
//
//   GET /api/values/{id?}   1,024 random characters from the post's 63-character alphabet
//   GET /api/values/fixed   1,024 characters generated once at start (not in the post, which
//                           answered every id with a random string; the route is added
//                           before the post's, so /api/values/5 is unaffected)
//
// APP_VARIANT picks how the string is made and sent:
//   "faithful"  the post's code: a new Random(DateTime.Now.Millisecond) per request (seeded
//               Randoms use .NET's legacy subtractive generator: 1,000 possible seeds, so
//               two requests in the same millisecond get the same string), written with
//               Response.WriteAsync(string): no Content-Type and no Content-Length, so
//               Kestrel sends the body chunked [expected; NOT VERIFIED here, no .NET SDK].
//   "fair"      the fair rows' contract: Random.Shared (thread-safe, per-thread xoshiro256**,
//               no lock) per request, Content-Type text/plain; charset=utf-8 and
//               Content-Length 1024 set, no Server header.
//
// Changes to the post's code, all marked "benchlib:": the listen address ($HOST, $PORT;
// the post used the default http://localhost:5000), the variant switch and the fixed route.
// appsettings.json sets the log level to Error as kataras' project did (the post modified
// "his example"): no per-request log line.
using System;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Routing;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore;
using Microsoft.Extensions.DependencyInjection;

public class Startup
{
    // benchlib: the variant, checked at start
    static readonly string Variant = Environment.GetEnvironmentVariable("APP_VARIANT") ?? "fair";

    static void Main(string[] args)
    {
        if (Variant != "faithful" && Variant != "fair")
        {
            Console.Error.WriteLine($"APP_VARIANT={Variant}: expected one of faithful, fair");
            Environment.Exit(2);
        }
        var host = Environment.GetEnvironmentVariable("HOST") ?? "127.0.0.1";  // benchlib
        var port = Environment.GetEnvironmentVariable("PORT") ?? "5000";       // benchlib
        WebHost.CreateDefaultBuilder(args)
            .UseUrls($"http://{host}:{port}")                                    // benchlib
            .UseKestrel(options => options.AddServerHeader = Variant == "faithful")  // benchlib
            .UseStartup<Startup>()
            .Build().Run();
    }

    public void ConfigureServices(IServiceCollection services)
        => services.AddRouting();

    const string chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ";

    static string RandomString(int length)
    {
        var random = new Random(DateTime.Now.Millisecond);
        var bytes = new char[length];
        for (var i = 0; i < length; i++)
        {
            bytes[i] = chars[random.Next(chars.Length)];
        }
        return new string(bytes);
    }

    // benchlib: the fair rows' generator, Random.Shared (no allocation of a generator, no lock)
    static byte[] RandomBytes(int length)
    {
        var bytes = new byte[length];
        for (var i = 0; i < length; i++)
        {
            bytes[i] = (byte)chars[Random.Shared.Next(chars.Length)];
        }
        return bytes;
    }

    // benchlib: the fair rows' response, Content-Type and Content-Length set
    static System.Threading.Tasks.Task WritePlain(HttpContext context, byte[] body)
    {
        context.Response.ContentType = "text/plain; charset=utf-8";
        context.Response.ContentLength = body.Length;
        return context.Response.Body.WriteAsync(body, 0, body.Length);
    }

    public void Configure(IApplicationBuilder app)
    {
        var routeBuilder = new RouteBuilder(app);
        //var txt = new string('n', 10000);
        if (Variant == "faithful")
        {
            var fixedTxt = RandomString(1024);                                   // benchlib
            routeBuilder.MapGet("api/values/fixed", context => context.Response.WriteAsync(fixedTxt));  // benchlib
            routeBuilder.MapGet("api/values/{id?}", context =>
            {
                var txt = RandomString(1024);
                return context.Response.WriteAsync(txt);
            });
        }
        else
        {
            var fixedBody = RandomBytes(1024);                                   // benchlib
            routeBuilder.MapGet("api/values/fixed", context => WritePlain(context, fixedBody));
            routeBuilder.MapGet("api/values/{id?}", context => WritePlain(context, RandomBytes(1024)));
        }
        var routes = routeBuilder.Build();
        app.UseRouter(routes);
    }
}
