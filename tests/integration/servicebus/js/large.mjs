// A 50 MB message through the JavaScript SDK, on a Premium emulator whose queue sets its own
// MaxMessageSizeInKilobytes (51,200) through the administration client; a larger one is refused.
import { ServiceBusAdministrationClient } from "@azure/service-bus";
import { randomBytes } from "node:crypto";
import { assert, receiveExactly, run } from "./harness.mjs";

const admin = new ServiceBusAdministrationClient(process.env.SERVICEBUS_MANAGEMENT_CONNECTION);
const MB = 1_000_000;

await run({
  async "a 50 MB message in and out of a queue of 50 MiB messages"(client) {
    const created = await admin.createQueue("large", { maxMessageSizeInKilobytes: 51200 });
    assert.equal(created.maxMessageSizeInKilobytes, 51200);
    const body = randomBytes(50 * MB);
    const sender = client.createSender("large");
    await sender.sendMessages({ body });
    await assert.rejects(sender.sendMessages({ body: randomBytes(51200 * 1024 + 1) }), (error) => {
      assert.match(String(error.code ?? error.name ?? error), /MessageSizeExceeded|MessageTooLarge/);
      return true;
    });
    await sender.close();
    const receiver = client.createReceiver("large");
    const [message] = await receiveExactly(receiver, 1, 60000);
    assert.ok(Buffer.compare(Buffer.from(message.body), body) === 0, "the body came back changed");
    await receiver.completeMessage(message);
    await receiver.close();
  },
});
