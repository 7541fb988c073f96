namespace App.Models;

public sealed class DatabasesConfiguration
{
    public MongoDatabaseConfiguration? UsersDb { get; set; }
}

public sealed class MongoDatabaseConfiguration
{
    public string? ConnectionString { get; set; }
    public string? DatabaseName { get; set; }
    public string? CollectionName { get; set; }
}
