"""Weather update client (chapter 1's, as chapter 2 builds on it).

Subscribes to the updates of one zipcode (and to the server's end marker), and prints the
average temperature once the server says END.
"""

import argparse

import zmq  # pyzmq code: on brokerless through `python -m brokerless.compat.as_zmq`


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connect", default="tcp://localhost:5556")
    parser.add_argument("--zipcode", default="10001")
    args = parser.parse_args()

    context = zmq.Context()
    socket = context.socket(zmq.SUB)
    socket.connect(args.connect)
    socket.subscribe(b"END")  # first: in force by the time the server sees our zipcode
    socket.subscribe(f"{args.zipcode} ")

    temperatures = []
    while (update := socket.recv_string()) != "END":
        _zipcode, temperature, _relhumidity = update.split()
        temperatures.append(int(temperature))
    if temperatures:
        average = sum(temperatures) / len(temperatures)
        print(
            f"Average temperature for zipcode '{args.zipcode}' was {average:.1f}F "
            f"over {len(temperatures)} updates"
        )
    else:
        print(f"No update for zipcode '{args.zipcode}'")
    socket.close()
    context.term()


if __name__ == "__main__":
    main()
