// The study's repository, quirks included: registered Scoped, so a new MongoClient is built
// for every request (the driver's ClusterRegistry shares one cluster, and so one connection
// pool, between clients with equal settings), and GetUser first reads the whole collection
// with Find(_ => true) and discards the result, then runs the real query: two round trips.
using App.Models;
using Microsoft.Extensions.Options;
using MongoDB.Driver;

namespace App.Faithful;

public sealed class UsersRepository
{
    private readonly IMongoCollection<User> _usersCollection;

    public UsersRepository(IOptions<DatabasesConfiguration> configuration)
    {
        var db = configuration.Value.UsersDb!;
        var mongoClient = new MongoClient(db.ConnectionString);
        _usersCollection = mongoClient.GetDatabase(db.DatabaseName).GetCollection<User>(db.CollectionName);
    }

    public async Task<User?> GetUser(int id, CancellationToken cancellationToken)
    {
        var users = await _usersCollection.Find(_ => true).ToListAsync();

        return await _usersCollection
            .Find(u => u.Id == id)
            .FirstOrDefaultAsync(cancellationToken: cancellationToken);
    }
}

public sealed class UsersService
{
    private readonly UsersRepository _usersRepository;

    public UsersService(UsersRepository usersRepository)
    {
        _usersRepository = usersRepository;
    }

    public async Task<User?> GetUser(int id)
    {
        return await _usersRepository.GetUser(id, CancellationToken.None);
    }
}
