// Runs named scenarios against the emulator whose connection string is in SERVICEBUS_CONNECTION;
// prints one line per scenario and exits 1 if any failed (pytest shows the JS error and stack).
import assert from "node:assert/strict";
import { ServiceBusClient } from "@azure/service-bus";

export { assert };

export async function receiveExactly(receiver, count, waitMs = 10000) {
  const received = [];
  const deadline = Date.now() + 4 * waitMs;
  while (received.length < count && Date.now() < deadline) {
    received.push(...(await receiver.receiveMessages(count - received.length, { maxWaitTimeInMs: waitMs })));
  }
  assert.equal(received.length, count, `expected ${count} messages, got ${received.length}`);
  return received;
}

export async function run(scenarios) {
  const connection = process.env.SERVICEBUS_CONNECTION;
  assert.ok(connection, "SERVICEBUS_CONNECTION is not set");
  const client = new ServiceBusClient(connection, { retryOptions: { maxRetries: 1, timeoutInMs: 30000 } });
  let failed = 0;
  try {
    for (const [name, scenario] of Object.entries(scenarios)) {
      try {
        await scenario(client);
        console.log(`PASS ${name}`);
      } catch (error) {
        failed += 1;
        console.log(`FAIL ${name}: ${error?.stack ?? error}`);
      }
    }
  } finally {
    await client.close();
  }
  process.exitCode = failed ? 1 : 0;
}
