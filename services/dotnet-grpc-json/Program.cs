// dotnet-grpc-json: study 05's .NET server (seed 004, peterdeme/Grpc.Json.PerformanceTest)
// on .NET 8: the seed's two payloads as gRPC or as JSON over HTTP. Written for users with a
// .NET SDK; NOT BUILT OR RUN HERE (no .NET SDK, NuGet or mcr.microsoft.com on this machine).
//
// APP_VARIANT picks the server, on $HOST:$PORT:
//   "grpc"      ASP.NET Core gRPC (Grpc.AspNetCore; the seed's Grpc.Core C-core server is
//               deprecated), HTTP/2 over cleartext (Kestrel needs an Http2-only endpoint
//               for that): /SmallPayloadService/SendSmallPayload, /HugePayloadService/SendHugePayload.
//   "json"      a minimal API (the seed used MVC controllers), HTTP/1.1: POST /small, POST /huge.
//   "json-h2c"  the same minimal API on an Http2-only endpoint (h2c with prior knowledge).
// Both parse the request into its type (the seed's JSON server never read the body: no
// [FromBody]) and build the response per call, as the seed's gRPC server did. JSON: requests
// as the seed's client wrote them (PascalCase; System.Text.Json's web defaults match names
// case-insensitively), responses camelCase as the seed's MVC server sent them.
// appsettings.json sets the log level to Error: no per-request log line.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading.Tasks;
using Grpc.Core;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Hosting;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Server.Kestrel.Core;
using Microsoft.Extensions.DependencyInjection;

public record SmallRequestJson(string Message);
public record SmallResponseJson(string Message);
public record HugeRequestJson(List<string> StringList, List<int> IntList);
public record HugeResponseJson(List<string> StringList, List<int> IntList);

public class SmallService : SmallPayloadService.SmallPayloadServiceBase
{
    public override Task<SmallResponse> SendSmallPayload(SmallRequest request, ServerCallContext context) =>
        Task.FromResult(new SmallResponse { Message = "SmallResponse" });
}

public class HugeService : HugePayloadService.HugePayloadServiceBase
{
    public override Task<HugeResponse> SendHugePayload(HugeRequest request, ServerCallContext context)
    {
        var response = new HugeResponse();
        response.StringList.AddRange(Enumerable.Repeat(new string('a', 25), 150));
        response.IntList.AddRange(Enumerable.Repeat(123, 150));
        return Task.FromResult(response);
    }
}

public static class Program
{
    public static void Main(string[] args)
    {
        var variant = Environment.GetEnvironmentVariable("APP_VARIANT") ?? "grpc";
        if (variant != "grpc" && variant != "json" && variant != "json-h2c")
            throw new ArgumentException($"APP_VARIANT={variant}: valid: grpc, json, json-h2c");
        var host = Environment.GetEnvironmentVariable("HOST") ?? "127.0.0.1";
        var port = int.Parse(Environment.GetEnvironmentVariable("PORT") ?? "8080");
        var builder = WebApplication.CreateSlimBuilder(args);
        builder.WebHost.ConfigureKestrel(k =>
        {
            k.AddServerHeader = false;
            k.Listen(System.Net.IPAddress.Parse(host), port,
                     o => o.Protocols = variant == "json" ? HttpProtocols.Http1 : HttpProtocols.Http2);
        });
        if (variant == "grpc")
            builder.Services.AddGrpc();
        var app = builder.Build();
        if (variant == "grpc")
        {
            app.MapGrpcService<SmallService>();
            app.MapGrpcService<HugeService>();
        }
        else
        {
            app.MapPost("/small", (SmallRequestJson request) => Results.Json(new SmallResponseJson("SmallResponse")));
            app.MapPost("/huge", (HugeRequestJson request) => Results.Json(new HugeResponseJson(
                Enumerable.Repeat(new string('a', 25), 150).ToList(), Enumerable.Repeat(123, 150).ToList())));
        }
        app.Run();
    }
}
