// The JavaScript administration client, unmodified, over the emulator's HTTPS management port: it
// trusts the emulator's generated certificate through NODE_EXTRA_CA_CERTS, as any Node client would.
import { ServiceBusAdministrationClient } from "@azure/service-bus";
import { assert, receiveExactly, run } from "./harness.mjs";

const admin = new ServiceBusAdministrationClient(process.env.SERVICEBUS_MANAGEMENT_CONNECTION);

await run({
  async "create, update and delete a queue that carries messages meanwhile"(client) {
    const created = await admin.createQueue("js-queue", { maxDeliveryCount: 4, lockDuration: "PT30S" });
    assert.equal(created.maxDeliveryCount, 4);
    assert.ok((await admin.queueExists("js-queue")));
    const properties = await admin.getQueue("js-queue");
    properties.maxDeliveryCount = 6;
    await admin.updateQueue(properties);
    assert.equal((await admin.getQueue("js-queue")).maxDeliveryCount, 6);
    const sender = client.createSender("js-queue");
    await sender.sendMessages({ body: "hello" });
    await sender.close();
    assert.equal((await admin.getQueueRuntimeProperties("js-queue")).activeMessageCount, 1);
    const receiver = client.createReceiver("js-queue");
    const [message] = await receiveExactly(receiver, 1);
    await receiver.completeMessage(message);
    await receiver.close();
    await admin.deleteQueue("js-queue");
    assert.equal(await admin.queueExists("js-queue"), false);
  },

  async "a topic, a subscription and a SQL rule with an action"(client) {
    await admin.createTopic("js-topic");
    await admin.createSubscription("js-topic", "high");
    await admin.deleteRule("js-topic", "high", "$Default");
    await admin.createRule("js-topic", "high", "priority", { sqlExpression: "priority = 'high'" }, {
      sqlExpression: "SET sys.Label = 'urgent'",
    });
    const rules = [];
    for await (const rule of admin.listRules("js-topic", "high")) rules.push(rule.name);
    assert.deepEqual(rules, ["priority"]);
    const sender = client.createSender("js-topic");
    await sender.sendMessages([
      { body: "low", applicationProperties: { priority: "low" } },
      { body: "high", applicationProperties: { priority: "high" } },
    ]);
    await sender.close();
    const receiver = client.createReceiver("js-topic", "high");
    const [message] = await receiveExactly(receiver, 1);
    assert.equal(message.body, "high");
    assert.equal(message.subject, "urgent");
    await receiver.completeMessage(message);
    await receiver.close();
    await admin.deleteTopic("js-topic");
  },

  async "a name taken is 409, a missing entity 404, a lock of 4 s 400"() {
    await assert.rejects(admin.createQueue("work"), (error) => error.statusCode === 409);
    await assert.rejects(admin.getQueue("missing"), (error) => error.statusCode === 404);
    await assert.rejects(admin.createQueue("short-lock", { lockDuration: "PT4S" }), (error) => error.statusCode === 400);
  },
});
