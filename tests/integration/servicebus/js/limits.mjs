// Limits, against an emulator started with a quota of 2 messages per entity: the quota refusal,
// the advertised maximum message size as the batch's limit.
import { assert, receiveExactly, run } from "./harness.mjs";

await run({
  async "a send past the entity's quota is refused with QuotaExceeded"(client) {
    const sender = client.createSender("work");
    await sender.sendMessages([{ body: "1" }, { body: "2" }]);
    await assert.rejects(sender.sendMessages({ body: "3" }), (error) => {
      assert.equal(error.code, "QuotaExceeded", String(error));
      return true;
    });
    await sender.close();
    const receiver = client.createReceiver("work");
    const messages = await receiveExactly(receiver, 2);
    assert.deepEqual(messages.map((message) => message.body), ["1", "2"]);
    for (const message of messages) await receiver.completeMessage(message);
    await receiver.close();
  },

  async "a batch is limited by the link's 256 KB maximum message size"(client) {
    const sender = client.createSender("work");
    const batch = await sender.createMessageBatch();
    assert.equal(batch.maxSizeInBytes, 256 * 1024);
    assert.equal(batch.tryAddMessage({ body: Buffer.alloc(300 * 1024, 1) }), false);
    assert.equal(batch.tryAddMessage({ body: "fits" }), true);
    await sender.sendMessages(batch);
    await sender.close();
    const receiver = client.createReceiver("work", { receiveMode: "receiveAndDelete" });
    const [message] = await receiveExactly(receiver, 1);
    assert.equal(message.body, "fits");
    await receiver.close();
  },
});
