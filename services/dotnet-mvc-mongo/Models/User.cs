using MongoDB.Bson.Serialization.Attributes;

namespace App.Models;

/// <summary>As the study's Models/User.cs: BSON names from attributes; System.Text.Json writes
/// the properties in camelCase (id, name, surname, email).</summary>
public sealed class User
{
    [BsonId]
    public int Id { get; set; }
    [BsonElement("name")]
    public string? Name { get; set; }
    [BsonElement("surname")]
    public string? Surname { get; set; }
    [BsonElement("email")]
    public string? Email { get; set; }
}
