using System.Reflection;
using App.Models;
using Microsoft.AspNetCore.Mvc.Controllers;
using Microsoft.OpenApi.Models;
using MongoDB.Driver;

namespace App;

public class Startup
{
    private readonly IConfiguration _configuration;
    private readonly string _variant;

    public Startup(IConfiguration configuration)
    {
        _configuration = configuration;
        _variant = Environment.GetEnvironmentVariable("APP_VARIANT") ?? "fair";
        if (_variant != "faithful" && _variant != "fair")
        {
            throw new ArgumentException($"APP_VARIANT={_variant}: expected one of faithful, fair");
        }
    }

    public void ConfigureServices(IServiceCollection services)
    {
        // Only the chosen variant's controllers are registered (namespace App.Faithful or App.Fair).
        services.AddControllers().ConfigureApplicationPartManager(manager =>
        {
            var standard = manager.FeatureProviders.OfType<ControllerFeatureProvider>().ToList();
            foreach (var provider in standard)
            {
                manager.FeatureProviders.Remove(provider);
            }
            manager.FeatureProviders.Add(new VariantControllerFeatureProvider(
                _variant == "faithful" ? "App.Faithful" : "App.Fair"));
        });
        services.Configure<DatabasesConfiguration>(_configuration.GetSection("Databases"));

        if (_variant == "faithful")
        {
            // As the study's Startup.ConfigureServices: Swagger, and Scoped service and repository,
            // so a new repository (and a new MongoClient) is built for every request.
            services.AddSwaggerGen(c => { c.SwaggerDoc("v1", new OpenApiInfo { Title = "App", Version = "v1" }); });
            services.AddScoped<Faithful.UsersService>();
            services.AddScoped<Faithful.UsersRepository>();
        }
        else
        {
            // One client (and so one connection pool) for the process.
            services.AddSingleton<IMongoClient>(sp =>
                new MongoClient(_configuration["Databases:UsersDb:ConnectionString"]));
            services.AddSingleton(sp =>
            {
                var db = _configuration.GetSection("Databases:UsersDb");
                return sp.GetRequiredService<IMongoClient>()
                    .GetDatabase(db["DatabaseName"])
                    .GetCollection<User>(db["CollectionName"]);
            });
        }
    }

    public void Configure(IApplicationBuilder app, IWebHostEnvironment env)
    {
        if (_variant == "faithful")
        {
            // As the study's Startup.Configure, including its order.
            app.UseSwagger();
            app.UseSwaggerUI(c => { c.SwaggerEndpoint("/swagger/v1/swagger.json", "gRPCGraphQLWebSockets v1"); });
            app.UseRouting();
            app.UseEndpoints(endpoints => { endpoints.MapControllers(); });
            app.UseCors();
        }
        else
        {
            app.UseRouting();
            app.UseEndpoints(endpoints => { endpoints.MapControllers(); });
        }
    }
}

/// <summary>Controllers of one variant only: those in the given namespace.</summary>
internal sealed class VariantControllerFeatureProvider : ControllerFeatureProvider
{
    private readonly string _namespace;

    public VariantControllerFeatureProvider(string ns) => _namespace = ns;

    protected override bool IsController(TypeInfo typeInfo) =>
        base.IsController(typeInfo) && typeInfo.Namespace == _namespace;
}
